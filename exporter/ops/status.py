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

from exporter.analytics.format import jsonable, render
from exporter.core.errors import StorageError
from exporter.core.layout import LOCK_FILE, STATE_FILE, VERSIONS_DIR, has_state
from exporter.store.readers import reading
from exporter.store.state import StateDB, settled_runs

__all__ = ["PROJECT_COLUMNS", "RUN_COLUMNS", "Status", "read_status", "render_status"]

UTC = dt.timezone.utc

PROJECT_COLUMNS = (
    "id",
    "name",
    "checkpoint_at",
    "last_synced_at",
    "current_at",
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
    # Account-wide (issue 12): projects, share walked within the hour / day, the oldest lag,
    # open operations not re-read for a day.
    coverage: dict[str, Any] = field(default_factory=dict)
    # Parquet files among the data that are not part of the dataset (a stray copy, a file
    # written by hand): readers never read them; listed so that someone removes them.
    stray_files: list[str] = field(default_factory=list)
    # The events outbox (issue 22): pending per sink, the oldest waiting, delivered per sink.
    events: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "coverage": self.coverage,
            "events": {k: jsonable(v) for k, v in self.events.items()},
            "stray_files": self.stray_files,
            "projects": [{k: jsonable(v) for k, v in p.items()} for p in self.projects],
            "runs": [{k: jsonable(v) for k, v in r.items()} for r in self.runs],
        }


def _at(us: int | None) -> dt.datetime | None:
    return (
        None if us is None else dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)
    )


def _share(share: float | None) -> float | None:
    return None if share is None else round(share, 4)


def read_status(data_dir: Path | str, *, runs: int = 5, as_of: dt.datetime | None = None) -> Status:
    """The status of `data_dir` (a directory, or `file:///abs/dir` as `sync()` and `connect()`
    take it); `ConfigError` if it does not exist, `StorageError` if no sync has written its
    state yet or the state is unusable."""
    with reading(data_dir) as local:  # where the CLI's --data-dir and connect() look
        return _read_status(local, runs, as_of)


def _read_status(data_dir: Path, runs: int, as_of: dt.datetime | None) -> Status:
    from exporter.events.outbox import read_backlog  # pyarrow: only when the state is read

    path = data_dir / STATE_FILE
    if not has_state(data_dir):
        raise StorageError(f"no dataset in {data_dir} yet: run `opsaudit sync` first")
    now = as_of or dt.datetime.now(UTC)
    state = StateDB(path, read_only=True)
    try:
        project_rows = state.projects_rows()
        run_rows = settled_runs(state.runs_rows(), data_dir / LOCK_FILE)
        cov = state.coverage(int(now.timestamp() * 1_000_000))
        by_last_read = state.open_by_last_read(int(now.timestamp() * 1_000_000))
        known = state.known_files()
        backlog = read_backlog(state)
    finally:
        state.close()
    on_disk = (p.relative_to(data_dir).as_posix() for p in data_dir.glob(f"{VERSIONS_DIR}/*/*"))
    stray = sorted(p for p in on_disk if p not in known)
    status = Status(as_of=now, stray_files=stray)
    status.coverage = {
        "projects": cov.projects,
        "synced_within_hour": _share(cov.share_hour),
        "synced_within_day": _share(cov.share_day),
        "oldest_lag_seconds": None if cov.oldest_lag_us is None else cov.oldest_lag_us // 10**6,
        "open_not_reread_within_day": cov.open_unchecked_day,
        # Open operations by time since their last re-read (the refresh schedule).
        "open_by_last_read": by_last_read,
    }
    status.events = {
        "pending": backlog.pending,
        "oldest_pending_at": _at(backlog.oldest_us),
        "delivered": backlog.delivered,
    }
    for p in project_rows:
        # Lag from when its trail was last known complete (a walk, or a listing showing it
        # idle: `--skip-idle`), not from its last walk.
        current = _at(p.current_at)
        status.projects.append(
            {
                "id": p.id,
                "name": p.name,
                "checkpoint_at": _at(p.checkpoint_at),
                "last_synced_at": _at(p.last_synced_at),
                "current_at": current,
                "open_operations": p.open_operations,
                "lag_seconds": None if current is None else int((now - current).total_seconds()),
                "deleted": p.deleted_at is not None,
                "last_error": p.last_error,
            }
        )
    for r in reversed(run_rows[-runs:] if runs else []):  # oldest first in the state
        record: dict[str, Any] = {name: getattr(r, name) for name in RUN_COLUMNS}
        record["started_at"] = _at(r.started_at)
        record["finished_at"] = _at(r.finished_at)
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
    c = status.coverage
    lag = c["oldest_lag_seconds"]
    walked = (
        "no projects"  # no share of them walked (an account without any, or all deleted)
        if not c["projects"]
        else f"{c['projects']} projects, {c['synced_within_hour']:.0%} walked within the hour, "
        f"{c['synced_within_day']:.0%} within the day; oldest lag "
        f"{'-' if lag is None else f'{lag}s'}"
    )
    coverage = (
        f"coverage: {walked}; {c['open_not_reread_within_day']} open "
        "operation(s) not re-read for a day\n"
    )
    pending = status.events.get("pending") or {}
    if any(pending.values()):
        oldest = status.events["oldest_pending_at"]
        coverage += (
            "events waiting for delivery: "
            + ", ".join(f"{n} for the {sink}" for sink, n in pending.items() if n)
            + f" (the oldest since {oldest:%Y-%m-%d %H:%M:%SZ}); the next sync retries them\n"
        )
    ages = c.get("open_by_last_read") or {}
    if any(ages.values()):
        spans = ", ".join(
            f"{n} within {label}" if label != "older" else f"{n} older" for label, n in ages.items()
        )
        coverage += f"open operations by last re-read: {spans}\n"
    if status.stray_files:
        coverage += (
            f"{len(status.stray_files)} file(s) among the data are not part of the dataset and "
            f"are never read (remove them): {', '.join(status.stray_files[:10])}\n"
        )
    return f"{coverage}\n{projects}\n{runs}"
