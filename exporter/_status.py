"""`status` as data: per project checkpoint, last sync, open operations and lag; the last runs.

Read from the state database, the source of truth (the Parquet copies of `projects` and
`sync_runs` are rewritten only at the end of a run), so a notebook or a monitoring script gets
the same answer as `opsaudit status`. Nothing here writes.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from exporter._errors import ConfigError, StorageError
from exporter._format import jsonable, render

__all__ = ["PROJECT_COLUMNS", "RUN_COLUMNS", "Status", "read_status", "render_status"]

UTC = dt.timezone.utc

PROJECT_COLUMNS = (
    "id",
    "name",
    "checkpoint_at",
    "last_synced_at",
    "open_operations",
    "lag_seconds",
    "deleted",
    "last_error",
)
RUN_COLUMNS = (
    "run_id",
    "started_at",
    "finished_at",
    "outcome",
    "projects_ok",
    "projects_failed",
    "requests",
    "responses_429",
    "new_operations",
    "changed_operations",
)


@dataclass
class Status:
    """Where each project stands and what the last runs did, as of `as_of`."""

    as_of: dt.datetime
    projects: list[dict[str, Any]] = field(default_factory=list)  # PROJECT_COLUMNS
    runs: list[dict[str, Any]] = field(default_factory=list)  # RUN_COLUMNS, newest first

    def as_dict(self) -> dict[str, Any]:
        return {
            "projects": [{k: jsonable(v) for k, v in p.items()} for p in self.projects],
            "runs": [{k: jsonable(v) for k, v in r.items()} for r in self.runs],
        }


def _at(us: int | None) -> dt.datetime | None:
    return (
        None if us is None else dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)
    )


def read_status(data_dir: Path, *, runs: int = 5, as_of: dt.datetime | None = None) -> Status:
    """The status of `data_dir`; `ConfigError` if it does not exist, `StorageError` if no sync
    has written its state yet or the state is unusable."""
    from exporter._state import StateDB
    from exporter._storage import STATE_FILE

    data_dir = Path(data_dir)
    if not data_dir.is_dir():
        raise ConfigError(
            f"--data-dir {data_dir} does not exist; run `opsaudit sync --data-dir {data_dir}` "
            "first, or point --data-dir (or $OPSAUDIT_DATA_DIR) at an existing dataset"
        )
    path = data_dir / STATE_FILE
    if not path.is_file() or path.stat().st_size == 0:
        raise StorageError(f"no dataset in {data_dir} yet: run `opsaudit sync` first")
    now = as_of or dt.datetime.now(UTC)
    state = StateDB(path)
    try:
        project_rows = state.query(
            "SELECT p.id, p.name, p.checkpoint_us, p.last_synced_us, "
            "(SELECT count(*) FROM open_ops o WHERE o.project_id = p.id AND "
            " coalesce(o.status NOT IN ('finished', 'cancelled', 'skipped'), true)), "
            "p.deleted_us IS NOT NULL, p.last_error FROM projects p ORDER BY p.id"
        )
        run_rows = state.query(
            "SELECT run_id, started_us, finished_us, outcome, projects_ok, projects_failed, "
            "requests, responses_429, new_operations, changed_operations "
            "FROM runs ORDER BY started_us DESC LIMIT ?",
            (runs,),
        )
    finally:
        state.close()
    status = Status(as_of=now)
    for pid, name, checkpoint, synced, open_ops, deleted, error in project_rows:
        last = _at(synced)
        status.projects.append(
            {
                "id": pid,
                "name": name,
                "checkpoint_at": _at(checkpoint),
                "last_synced_at": last,
                "open_operations": open_ops,
                "lag_seconds": None if last is None else int((now - last).total_seconds()),
                "deleted": bool(deleted),
                "last_error": error,
            }
        )
    for row in run_rows:
        record = dict(zip(RUN_COLUMNS, row))
        record["started_at"] = _at(record["started_at"])
        record["finished_at"] = _at(record["finished_at"])
        status.runs.append(record)
    return status


def render_status(status: Status, fmt: str) -> str:
    """`json`: one object {projects, runs}; `table`: the two tables one after the other."""
    if fmt == "json":
        return orjson.dumps(status.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    projects = render(
        PROJECT_COLUMNS, [tuple(p[c] for c in PROJECT_COLUMNS) for p in status.projects], fmt
    )
    runs = render(RUN_COLUMNS, [tuple(r[c] for c in RUN_COLUMNS) for r in status.runs], fmt)
    return f"{projects}\n{runs}"
