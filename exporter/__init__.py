"""opsaudit: a complete, exact, queryable audit trail of a hosted-Postgres platform's operations.

Use from a notebook or a script::

    import exporter
    summary = exporter.sync(exporter.SyncConfig(data_dir=Path("data"), api_key=key))
    con = exporter.connect(Path("data"))      # DuckDB with every view defined
    con.sql("SELECT * FROM failures_by_action").df()
"""

from __future__ import annotations

from typing import Any

from exporter._client import RetryPolicy
from exporter._errors import (
    ApiError,
    AuthError,
    ConfigError,
    ExitCode,
    LockHeldError,
    NotFoundError,
    OpsauditError,
    QueryError,
    StorageError,
    TransientError,
)
from exporter._sync import RunSummary, SyncConfig, sync
from exporter._walk import WalkLimits

__all__ = [
    "ApiError",
    "AuthError",
    "ConfigError",
    "ExitCode",
    "LockHeldError",
    "NotFoundError",
    "OpsauditError",
    "QueryError",
    "RetryPolicy",
    "RunSummary",
    "StorageError",
    "SyncConfig",
    "TransientError",
    "WalkLimits",
    "build_report",
    "connect",
    "sync",
]


def __getattr__(name: str) -> Any:
    # The analytics layer imports DuckDB views lazily: `import exporter` stays cheap for cron.
    if name == "connect":
        from exporter._sql import connect

        return connect
    if name == "build_report":
        from exporter._report import build_report

        return build_report
    raise AttributeError(f"module 'exporter' has no attribute {name!r}")
