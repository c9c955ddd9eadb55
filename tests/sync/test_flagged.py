"""The report's flagged record (issue 24, DESIGN.md): every commit writes the versions it adds
that are not terminal or carry an error text (the rows the report lists or reads apart:
failing, stuck, errors, superseded) in the same state transaction, and `opsaudit report` reads
them there instead of reading every version's id. A dataset written before it is recorded once
by the next sync's recovery; the report's rows and output are the same before and after, in
every window."""

from __future__ import annotations

import datetime as dt
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from exporter.analytics.report import REPORT_SQL
from exporter.analytics.report_figures import ROWS, keep_rows, string_list_literal
from exporter.analytics.report_figures import timestamp_literal as ts
from exporter.analytics.views import connect
from exporter.core.layout import FLAGGED_META
from exporter.core.tables import VERSIONS_SCHEMA
from exporter.store.local.dataset import Dataset

from .conftest import run_sync
from .test_summary import reports, windows_of
from .test_superseded import PRE_SUPERSEDED, every_view

UTC = dt.timezone.utc
_COLUMNS = (
    "id, version, project_id, branch_id, action, status, failures_count, error, "
    "total_duration_ms, created_at, updated_at, created_date"
)


def recorded_flagged(data_dir: Path) -> list[tuple[Any, ...]]:
    """The record's rows (the files the state lists), sorted."""
    state = sqlite3.connect(data_dir / "state.sqlite")
    try:
        files = [
            str(data_dir / path)
            for (path,) in state.execute(
                "SELECT path FROM files WHERE state = 'live' AND path LIKE 'flagged/%'"
            )
        ]
        flag = state.execute("SELECT value FROM meta WHERE key = ?", (FLAGGED_META,)).fetchone()
    finally:
        state.close()
    assert flag == ("1",)
    return duckdb.execute(
        f"SELECT {_COLUMNS} FROM read_parquet(?) ORDER BY ALL", [files]
    ).fetchall()


def derived_flagged(data_dir: Path) -> list[tuple[Any, ...]]:
    """What the record must hold: every committed version not terminal or with an error."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        return con.execute(
            f"SELECT {_COLUMNS} FROM stored_operation_versions "
            "WHERE NOT is_terminal(status) OR (error IS NOT NULL AND error <> '') ORDER BY ALL"
        ).fetchall()
    finally:
        con.close()


def _window(w: dict[str, Any]) -> str:
    projects = w.get("project_ids")
    return (
        f"since := {ts(w.get('since'))}, until := {ts(w.get('until'))}, "
        f"projects := {string_list_literal(projects)}"
    )


def kept_rows(data_dir: Path, windows: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """The rows `opsaudit report` keeps for each window (`keep_rows`), sorted."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        out = []
        for w in windows:
            keep_rows(con, _window(w), whole=not w)  # all time: the one join of both records
            out.append(con.execute(f"FROM {ROWS} ORDER BY ALL").fetchall())
        return out
    finally:
        con.close()


def scanned_rows(data_dir: Path, windows: list[dict[str, Any]]) -> list[list[tuple[Any, ...]]]:
    """report_rows of each window: the same rows found in every version (the reference)."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        return [
            con.execute(f"FROM report_rows({_window(w)}) ORDER BY ALL").fetchall() for w in windows
        ]
    finally:
        con.close()


def without_record(data_dir: Path, copy: Path) -> Path:
    """A copy whose state says it has no flagged record: the report reads every version."""
    shutil.copytree(data_dir, copy)
    state = sqlite3.connect(copy / "state.sqlite")
    try:
        with state:
            state.execute("DELETE FROM meta WHERE key = ?", (FLAGGED_META,))
    finally:
        state.close()
    return copy


def _recover(data_dir: Path) -> None:
    dataset = Dataset(data_dir)  # what a sync does first, under the lock: recover + migrate
    try:
        dataset.recover()
    finally:
        dataset.close()


def test_a_dataset_written_before_the_record_reports_the_same_after_its_migration(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(PRE_SUPERSEDED, data_dir)
    windows = windows_of(data_dir)
    before = reports(data_dir, windows)  # no record: every version read
    rows_before = kept_rows(data_dir, windows)
    assert rows_before == scanned_rows(data_dir, windows)
    views_before = every_view(data_dir)

    _recover(data_dir)

    # One file per created month of the versions, written a month at a time (memory).
    months = {p.parent.name for p in (data_dir / "operation_versions").glob("*/*.parquet")}
    assert len(list((data_dir / "flagged").glob("*.parquet"))) == len(months) == 2
    record = recorded_flagged(data_dir)
    assert record == derived_flagged(data_dir)
    assert len(record) == 79  # of the 542 versions
    assert kept_rows(data_dir, windows) == rows_before
    assert reports(data_dir, windows) == before
    assert every_view(data_dir) == views_before

    _recover(data_dir)  # once: a second recovery writes nothing more
    assert len(list((data_dir / "flagged").glob("*.parquet"))) == len(months)


@pytest.mark.parametrize("commit_rows", [20, 100_000])  # commits of rows, or rows written ahead
def test_each_commit_records_its_flagged_versions(
    make_sim: Any, tmp_path: Path, commit_rows: int
) -> None:
    sim = make_sim(
        seed=7,
        projects=2,
        shared_projects=0,
        days=50,
        ops_per_project_per_day=12,
        live_ops_per_project_per_hour=40,
    )
    data_dir = tmp_path / "data"
    for _ in range(4):
        summary = run_sync(sim, data_dir, page_size=20, commit_rows=commit_rows)
        assert summary.outcome == "ok"
        sim.advance(900)

    record = recorded_flagged(data_dir)
    assert record == derived_flagged(data_dir)
    assert any(r[5] not in ("finished", "cancelled", "skipped") for r in record)
    windows = windows_of(data_dir)
    reference = without_record(data_dir, tmp_path / "reference")
    assert kept_rows(data_dir, windows) == scanned_rows(reference, windows)
    assert reports(data_dir, windows) == reports(reference, windows)


def _version(i: int, version: int, status: str, ms: int, error: str | None) -> dict[str, Any]:
    created = dt.datetime(2026, 9, 1, tzinfo=UTC) + dt.timedelta(hours=i)
    return {
        "id": f"op-{i}",
        "project_id": f"p-{i % 2}",
        "branch_id": f"br-{i % 3}",
        "action": "start_compute" if i % 2 else "apply_config",
        "status": status,
        "failures_count": i % 3,
        "error": error,
        "created_at": created,
        "updated_at": created + dt.timedelta(seconds=ms // 1000 + version),
        "total_duration_ms": ms,
        "raw": "{}",
        "version": version,
        "observed_at": created + dt.timedelta(minutes=version),
        "run_id": f"r{version}",
        "created_date": created.date(),
    }


def test_a_superseded_version_the_record_does_not_hold_is_read_from_the_versions(
    tmp_path: Path,
) -> None:
    """A finished version without an error, later superseded (its duration corrected), is not
    in the flagged record: the report finds it among the versions, in every window, and the
    rows and output are those of the scan of every version."""
    first = [_version(i, 1, "finished" if i % 4 else "running", 1000 + i, None) for i in range(40)]
    first[5]["error"] = "boom"  # finished with an error text: flagged, superseded below
    later = [
        _version(i, 2, "finished", 2000 + i, None)
        for i in (1, 2, 5, 8, 30)  # 1, 2, 5, 30: finished before (8: running)
    ]
    data_dir = tmp_path / "data"
    dataset = Dataset(data_dir)
    try:
        dataset.recover()
        dataset.commit(pa.Table.from_pylist(first, schema=VERSIONS_SCHEMA), "a", "r1", print)
        dataset.commit(pa.Table.from_pylist(later, schema=VERSIONS_SCHEMA), "b", "r2", print)
    finally:
        dataset.close()
    assert len(recorded_flagged(data_dir)) == 11  # 10 running, 1 with an error
    windows = [
        {},
        {"since": dt.datetime(2026, 9, 1, 4, tzinfo=UTC)},
        {"until": dt.datetime(2026, 9, 1, 3, tzinfo=UTC)},
        {"project_ids": ["p-0"]},
    ]
    reference = without_record(data_dir, tmp_path / "reference")
    rows = kept_rows(data_dir, windows)
    assert rows == scanned_rows(reference, windows)
    superseded = sorted((r[0], r[1]) for r in rows[0] if r[-1])
    assert superseded == [("op-1", 1), ("op-2", 1), ("op-30", 1), ("op-5", 1), ("op-8", 1)]
    assert reports(data_dir, windows) == reports(reference, windows)
