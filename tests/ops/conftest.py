"""Fixtures for the operator commands (check, metrics, doctor, report html): real syncs of the
simulator on loopback, and the state read back with sqlite3 to know the exact expected values."""

from __future__ import annotations

import datetime as dt
import importlib.util
import sqlite3
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from click.testing import CliRunner, Result

from exporter.cli import cli

UTC = dt.timezone.utc
ROOT = Path(__file__).resolve().parents[2]


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", env=env)


@pytest.fixture
def make_sim(make_sim: Callable[..., Any]) -> Callable[..., Any]:
    """tests/conftest.py's make_sim with a small default world (1 day, 200 ops per project)."""

    def factory(**kwargs: Any) -> Any:
        kwargs.setdefault("days", 1)
        kwargs.setdefault("ops_per_project_per_day", 200)
        return make_sim(**kwargs)

    return factory


def run_sync(sim: Any, data_dir: Path, **kwargs: Any) -> Any:
    """One unpaced sync of the simulator into `data_dir`, with fast retries."""
    from exporter.api.client import RetryPolicy
    from exporter.engine.sync import SyncConfig, sync

    kwargs.setdefault("retry", RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02))
    config = SyncConfig(
        data_dir=data_dir, api_key=sim.personal_key, base_url=sim.base_url, max_rps=None, **kwargs
    )
    return sync(config)


def state_rows(data_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    """Rows of the state database, read with the sqlite3 module (not our code)."""
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def state_write(data_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> None:
    """Change the state as an older history would have left it (to build a finding)."""
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        with con:
            con.execute(sql, params)
    finally:
        con.close()


def at_us(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)


def stamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%d %H:%M:%SZ")


def iso(when: dt.datetime) -> str:
    return when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _analytics() -> ModuleType:
    """tests/analytics/conftest.py, whose writers make the datasets of hand-made rows."""
    spec = importlib.util.spec_from_file_location(
        "analytics_conftest", ROOT / "tests" / "analytics" / "conftest.py"
    )
    assert spec is not None and spec.loader is not None
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def analytics_dataset(data_dir: Path) -> Path:
    """The hand-computed dataset of tests/analytics/conftest.py, written into `data_dir`."""
    return _analytics().write_dataset(data_dir)  # type: ignore[no-any-return]


def write_versions(data_dir: Path, specs: list[tuple[Any, ...]], run_id: str) -> None:
    """Version rows written as one sync run would (tests/analytics/conftest.py)."""
    _analytics().write_versions(data_dir, specs, run_id)
