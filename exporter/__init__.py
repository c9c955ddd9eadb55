"""opsaudit: a complete, exact, queryable audit trail of a hosted-Postgres platform's operations.

Use from a notebook or a script::

    import exporter
    summary = exporter.sync(exporter.SyncConfig(data_dir=Path("data"), api_key=key))
    con = exporter.connect(Path("data"))      # DuckDB with every view defined
    con = exporter.connect("s3://bucket/org-1", storage_options=["AWS_REGION=eu-west-1"])
    con = exporter.connect([Path("data"), "s3://bucket/org-1"])   # read together
    con.sql("SELECT * FROM failures_by_action").df()
    exporter.read_status(Path("data")).projects   # what `opsaudit status` shows
    exporter.run_check(Path("data")).findings      # what `opsaudit check` finds
    events = exporter.EventsConfig(file=Path("events.jsonl"),
                                   filters=[exporter.parse_event_filter("status=failed")])
    exporter.sync(exporter.SyncConfig(data_dir=Path("data"), api_key=key, events=events))
"""

from __future__ import annotations

from typing import Any

from exporter.core.errors import (
    ApiError,
    AuthError,
    ConfigError,
    ExitCode,
    LockHeldError,
    NotFoundError,
    OpsauditError,
    QueryError,
    ReadOnlyError,
    StoppedError,
    StorageError,
    TransientError,
)

__all__ = [
    "ApiError",
    "AuthError",
    "ConfigError",
    "EventsConfig",
    "ExitCode",
    "LockHeldError",
    "NotFoundError",
    "OpsauditError",
    "QueryError",
    "ReadOnlyError",
    "RetryPolicy",
    "RunSummary",
    "StoppedError",
    "StorageError",
    "SyncConfig",
    "TransientError",
    "WalkLimits",
    "build_report",
    "check_read_only",
    "connect",
    "parse_event_filter",
    "read_status",
    "render",
    "render_html",
    "run_check",
    "run_demo",
    "run_doctor",
    "sync",
]


_LAZY = {
    "EventsConfig": "exporter.events.config",  # where a run's events go (SyncConfig.events)
    "parse_event_filter": "exporter.events.config",  # "status=failed", as --events-filter
    "RetryPolicy": "exporter.api.client",
    "RunSummary": "exporter.engine.sync",
    "SyncConfig": "exporter.engine.sync",
    "sync": "exporter.engine.sync",
    "WalkLimits": "exporter.engine.walk",
    "read_status": "exporter.ops.status",
    "render": "exporter.analytics.format",  # rows as table, json, jsonl, csv or markdown
    "render_html": "exporter.analytics.html",
    "run_check": "exporter.ops.check",
    "run_demo": "exporter.demo",  # the simulator, a sync: a dataset to try things on
    "run_doctor": "exporter.ops.doctor",
}


def __getattr__(name: str) -> Any:
    # Imported on first use: `opsaudit report` never pays for httpx and the sync engine, and
    # `opsaudit sync` never for DuckDB.
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "connect":
        from exporter.analytics.views import connect
        from exporter.core.duck import whole_package

        whole_package()  # a notebook's connection has DuckDB's whole API (`.sql(...).df()`)
        return connect
    if name == "check_read_only":
        from exporter.analytics.views import check_read_only

        return check_read_only
    if name == "build_report":
        from exporter.analytics.report import build_report

        return build_report
    raise AttributeError(f"module 'exporter' has no attribute {name!r}")
