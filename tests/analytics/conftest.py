"""A small fixed dataset in the exact on-disk layout, with hand-computable numbers.

Twelve operations over three UTC days and two projects; o3 has three versions and o5 two, in
separate files as two sync runs would write them; an unknown action (lfc_autoresize) and an
unknown status (waiting_for_quorum). The expected numbers in the tests are computed by hand
from the table below (latest states; `+s` = updated_at - created_at in seconds).

    id   project endpoint action           status              fc  ms    created (2025-01-)  +s
    o1   p1      ep1      start_compute    finished             0  100   10 10:00:00          1
    o2   p1      ep1      suspend_compute  finished             0  50    10 11:00:00          2
    o3   p1      ep1      start_compute    finished             2  300   10 12:00:00         10
    o4   p2      ep2      start_compute    finished             0  200   11 09:00:00          3
    o5   p2      ep2      suspend_compute  failed               1  NULL  11 10:00:00          5
    o6   p2      -        create_branch    cancelled            0  20    11 11:00:00          0
    o7   p1      ep1      lfc_autoresize   waiting_for_quorum   0  NULL  12 08:00:00          0
    o8   p1      ep1      start_compute    error                1  NULL  12 09:00:00          4
    o9   p2      -        create_branch    skipped              0  0     12 10:00:00          1
    o11  p1      ep1      suspend_compute  finished             0  60    12 10:30:00          1
    o10  p1      ep1      start_compute    finished             0  400   12 11:00:00          2
    o12  p2      ep2      start_compute    scheduling           0  0     12 12:00:00          0

Earlier versions: o3 v1 running (fc 0, +1 s), o3 v2 failed (fc 1, error "pageserver request
timed out", +5 s); o5 v1 running (fc 0, +1 s). o5 v2 carries error "pod not ready", o8 "no
capacity in region".
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from exporter.core.model import TERMINAL_STATUSES
from exporter.core.tables import FLAGGED_COLUMNS
from exporter.store.local.dataset import (
    PROJECTS_SCHEMA,
    SUPERSEDED_SCHEMA,
    SYNC_RUNS_SCHEMA,
    VERSIONS_SCHEMA,
)
from exporter.store.local.summary import summary_of

UTC = dt.timezone.utc


def at(day: int, hh: int, mm: int = 0, ss: int = 0) -> dt.datetime:
    return dt.datetime(2025, 1, day, hh, mm, ss, tzinfo=UTC)


ERR_TIMEOUT = "pageserver request timed out"
ERR_POD = "pod not ready"
ERR_CAPACITY = "no capacity in region"

# (id, project, endpoint, action, status, failures_count, ms, created, +seconds, error, version)
FINAL: list[tuple[Any, ...]] = [
    ("o1", "p1", "ep1", "start_compute", "finished", 0, 100, at(10, 10), 1, None, 1),
    ("o2", "p1", "ep1", "suspend_compute", "finished", 0, 50, at(10, 11), 2, None, 1),
    ("o3", "p1", "ep1", "start_compute", "finished", 2, 300, at(10, 12), 10, None, 3),
    ("o4", "p2", "ep2", "start_compute", "finished", 0, 200, at(11, 9), 3, None, 1),
    ("o5", "p2", "ep2", "suspend_compute", "failed", 1, None, at(11, 10), 5, ERR_POD, 2),
    ("o6", "p2", None, "create_branch", "cancelled", 0, 20, at(11, 11), 0, None, 1),
    ("o7", "p1", "ep1", "lfc_autoresize", "waiting_for_quorum", 0, None, at(12, 8), 0, None, 1),
    ("o8", "p1", "ep1", "start_compute", "error", 1, None, at(12, 9), 4, ERR_CAPACITY, 1),
    ("o9", "p2", None, "create_branch", "skipped", 0, 0, at(12, 10), 1, None, 1),
    ("o11", "p1", "ep1", "suspend_compute", "finished", 0, 60, at(12, 10, 30), 1, None, 1),
    ("o10", "p1", "ep1", "start_compute", "finished", 0, 400, at(12, 11), 2, None, 1),
    ("o12", "p2", "ep2", "start_compute", "scheduling", 0, 0, at(12, 12), 0, None, 1),
]
EARLIER: list[tuple[Any, ...]] = [
    ("o3", "p1", "ep1", "start_compute", "running", 0, 0, at(10, 12), 1, None, 1),
    ("o3", "p1", "ep1", "start_compute", "failed", 1, 0, at(10, 12), 5, ERR_TIMEOUT, 2),
    ("o5", "p2", "ep2", "suspend_compute", "running", 0, 0, at(11, 10), 1, None, 1),
]


def _row(spec: tuple[Any, ...], run_id: str) -> dict[str, Any]:
    op_id, project, endpoint, action, status, fc, ms, created, plus, error, version = spec
    updated = created + dt.timedelta(seconds=plus)
    raw = {
        "id": op_id,
        "project_id": project,
        "action": action,
        "status": status,
        "failures_count": fc,
        "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "updated_at": updated.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    return {
        "id": op_id,
        "project_id": project,
        "branch_id": f"br-{project}",
        "endpoint_id": endpoint,
        "action": action,
        "status": status,
        "failures_count": fc,
        "error": error,
        "retry_at": None,
        "created_at": created,
        "updated_at": updated,
        "total_duration_ms": ms,
        "raw": orjson.dumps(raw).decode(),
        "version": version,
        "observed_at": updated + dt.timedelta(seconds=30),
        "run_id": run_id,
        "created_date": created.date(),
    }


def write_versions(data_dir: Path, specs: list[tuple[Any, ...]], run_id: str) -> None:
    """Write version rows as one sync run would: one file per created_month partition."""
    by_day: dict[str, list[dict[str, Any]]] = {}
    for spec in specs:
        by_day.setdefault(spec[7].date().isoformat()[:7], []).append(_row(spec, run_id))
    for month, rows in by_day.items():
        folder = data_dir / "operation_versions" / f"created_month={month}"
        folder.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pylist(rows, schema=VERSIONS_SCHEMA)
        pq.write_table(table, folder / f"part-{run_id}-0.parquet")
    # ... and its superseded record: (id, version - 1) of each later version (DESIGN.md).
    later = [_row(spec, run_id) for spec in specs]
    superseded = [(r["id"], r["version"] - 1) for r in later if r["version"] > 1]
    (data_dir / "superseded").mkdir(exist_ok=True)
    pq.write_table(
        pa.table(
            {"id": [i for i, _ in superseded], "version": [v for _, v in superseded]},
            schema=SUPERSEDED_SCHEMA,
        ),
        data_dir / "superseded" / f"part-{run_id}-0.parquet",
    )
    # ... and its summary record (DESIGN.md), from the same rows.
    (data_dir / "summary").mkdir(exist_ok=True)
    pq.write_table(
        summary_of(pa.Table.from_pylist(later, schema=VERSIONS_SCHEMA)),
        data_dir / "summary" / f"part-{run_id}-0.parquet",
    )
    # ... and its flagged record (DESIGN.md): the rows not terminal or with an error text.
    (data_dir / "flagged").mkdir(exist_ok=True)
    flagged = [r["status"] not in TERMINAL_STATUSES or bool(r["error"]) for r in later]
    pq.write_table(
        pa.Table.from_pylist(later, schema=VERSIONS_SCHEMA)
        .select(FLAGGED_COLUMNS)
        .filter(pa.array(flagged)),
        data_dir / "flagged" / f"part-{run_id}-0.parquet",
    )


def write_dataset(data_dir: Path) -> Path:
    """The fixed dataset: two runs of versions, projects.parquet and sync_runs.parquet."""
    write_versions(data_dir, EARLIER, "run-1")
    write_versions(data_dir, FINAL, "run-2")
    seen = at(12, 13)
    projects = [
        {"id": p, "name": f"project {p}", "region_id": "aws-us-east-2", "pg_version": 17}
        | {"first_seen_at": seen, "last_seen_at": seen, "open_operations": n}
        for p, n in (("p1", 2), ("p2", 2))
    ]
    (data_dir / "projects").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(projects, schema=PROJECTS_SCHEMA),
        data_dir / "projects" / "projects.parquet",
    )
    runs = [
        {"run_id": "run-1", "started_at": at(11, 10, 1), "finished_at": at(11, 10, 2)}
        | {"outcome": "ok", "new_operations": 2, "versions_written": 3},
        {"run_id": "run-2", "started_at": at(12, 13), "finished_at": at(12, 13, 1)}
        | {"outcome": "partial", "new_operations": 10, "versions_written": 12},
    ]
    (data_dir / "sync_runs").mkdir(parents=True)
    pq.write_table(
        pa.Table.from_pylist(runs, schema=SYNC_RUNS_SCHEMA),
        data_dir / "sync_runs" / "sync_runs.parquet",
    )
    from exporter.core.names import TABLES, schema

    for table in TABLES:  # a sync writes them (empty when no listing was read yet)
        (data_dir / table.name).mkdir(parents=True)
        pq.write_table(schema(table).empty_table(), data_dir / table.file)
    return data_dir


def as_synced(data_dir: Path) -> Path:
    """`data_dir` as a sync leaves it: its versions files committed in a state, whose recovery
    writes the superseded, summary and flagged records from them (the records written above, for a
    directory without a state, are replaced). The report then reads the summary record."""
    import shutil

    from exporter.store.local.dataset import Dataset, StagedFile
    from exporter.store.state import StateDB

    for record in ("superseded", "summary", "flagged"):
        shutil.rmtree(data_dir / record)
    files = sorted((data_dir / "operation_versions").glob("*/*.parquet"))
    staged = [
        StagedFile(
            p.relative_to(data_dir).as_posix(),
            p.relative_to(data_dir).as_posix(),
            p.parent.name,
            pq.read_metadata(p).num_rows,
            p.stat().st_size,
        )
        for p in files
    ]
    state = StateDB(data_dir / "state.sqlite")
    try:
        with state.transaction() as con:
            state.register_pending(con, staged, run_id="written")
    finally:
        state.close()
    dataset = Dataset(data_dir)
    try:
        dataset.recover()
    finally:
        dataset.close()
    return data_dir


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixed dataset (read-only: tests must not write into it)."""
    return write_dataset(tmp_path_factory.mktemp("analytics") / "data")


@pytest.fixture(scope="session")
def synced_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixed dataset as a sync leaves it (`as_synced`: with the summary record)."""
    return as_synced(write_dataset(tmp_path_factory.mktemp("analytics") / "data"))


@pytest.fixture(params=["every version", "summary record"])
def report_con(request: pytest.FixtureRequest, data_dir: Path, synced_data_dir: Path):  # type: ignore[no-untyped-def]
    """A connection to the fixed dataset, read both ways the report can: every version (no
    summary record) and the summary record (sql/90_report.sql)."""
    from exporter.analytics.views import connect

    connection = connect(data_dir if request.param == "every version" else synced_data_dir)
    yield connection
    connection.close()


@pytest.fixture
def con(data_dir: Path):  # type: ignore[no-untyped-def]
    from exporter.analytics.views import connect

    connection = connect(data_dir)
    yield connection
    connection.close()


def rows(con: Any, sql: str) -> list[dict[str, Any]]:
    """Run SQL; a list of dicts, one per row."""
    cursor = con.execute(sql)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, r)) for r in cursor.fetchall()]
