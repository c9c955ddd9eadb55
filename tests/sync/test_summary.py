"""The report's summary record (issue 24, DESIGN.md): every commit writes the summary of the
versions it adds (counts per project, branch and action; exact duration histograms per action;
per created month) in the same state transaction, and `opsaudit report` reads it for the whole
months of its window instead of every version. A dataset written before it is summarised once
by the next sync's recovery; the report reads the same before and after, in every window."""

from __future__ import annotations

import datetime as dt
import random
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pytest

from exporter.analytics.report import REPORT_SQL, build_report
from exporter.analytics.report_figures import totalled
from exporter.analytics.views import connect
from exporter.core.errors import StorageError
from exporter.core.layout import SUMMARY_META, summary_total_file
from exporter.core.tables import SUMMARY_SCHEMA, VERSIONS_SCHEMA
from exporter.store.local import dataset as dataset_module
from exporter.store.local.dataset import SUMMARY_MERGE_FILES, Dataset
from exporter.store.local.reader import committed_summary
from exporter.store.local.summary import merge_summaries, merged_summary, summary_of

from .conftest import run_sync
from .test_superseded import PRE_SUPERSEDED

UTC = dt.timezone.utc


def recorded_summary(data_dir: Path) -> list[tuple[Any, ...]]:
    """The record's rows (the files the state lists), merged per key as a reader sums them."""
    state = sqlite3.connect(data_dir / "state.sqlite")
    try:
        files = [
            str(data_dir / path)
            for (path,) in state.execute(
                "SELECT path FROM files WHERE state = 'live' AND path LIKE 'summary/%'"
            )
        ]
        flag = state.execute("SELECT value FROM meta WHERE key = ?", (SUMMARY_META,)).fetchone()
    finally:
        state.close()
    assert flag == ("1",)
    return duckdb.execute(_MERGED.format(source="read_parquet(?)"), [files]).fetchall()


# Rows of the same key summed, as the report reads them (a summary may be spread over files).
_MERGED = """
SELECT month, measure, project_id, branch_id, action, ms, sum(versions), sum(failed),
    sum(retries), sum(terminal), min(first_created_at), max(last_created_at)
FROM {source}
GROUP BY ALL
ORDER BY ALL
"""


def derived_summary(data_dir: Path) -> list[tuple[Any, ...]]:
    """What the record must hold: sql/90_report.sql's summary of every committed version."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        return con.execute(
            _MERGED.format(source="report_summary_of(stored_operation_versions)")
        ).fetchall()
    finally:
        con.close()


NOW = dt.datetime(2026, 12, 1, tzinfo=UTC)


def reports(data_dir: Path, windows: list[dict[str, Any]]) -> list[bytes]:
    """The report (as JSON) of each window, at a fixed `now`."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        return [orjson.dumps(build_report(con, now=NOW, **w).as_dict()) for w in windows]
    finally:
        con.close()


def without_record(data_dir: Path, copy: Path) -> Path:
    """A copy of the dataset whose state says it has no summary record: the report then reads
    every version (the scan it had before the record), the reference to compare with."""
    shutil.copytree(data_dir, copy)
    state = sqlite3.connect(copy / "state.sqlite")
    try:
        with state:
            state.execute("DELETE FROM meta WHERE key = ?", (SUMMARY_META,))
    finally:
        state.close()
    return copy


def windows_of(data_dir: Path) -> list[dict[str, Any]]:
    """All time, windows cutting months and holding whole ones, and a project's."""
    con = connect(data_dir, only=REPORT_SQL)
    try:
        first, last, project = con.execute(
            "SELECT min(created_at), max(created_at), min(project_id) FROM operations"
        ).fetchone()
    finally:
        con.close()
    middle = first + (last - first) / 2
    month = dt.datetime(middle.year, middle.month, 1, tzinfo=UTC)
    return [
        {},
        {"since": middle},
        {"until": middle},
        {"since": month},
        {"since": first + dt.timedelta(hours=5), "until": last - dt.timedelta(hours=5)},
        {"since": month - dt.timedelta(days=40), "until": month + dt.timedelta(days=1)},
        {"project_ids": [project]},
    ]


def test_a_dataset_written_before_the_record_reports_the_same_after_its_migration(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(PRE_SUPERSEDED, data_dir)
    windows = windows_of(data_dir)
    before = reports(data_dir, windows)  # no record: every version read

    dataset = Dataset(data_dir)  # what a sync does first, under the lock: recover + migrate
    try:
        dataset.recover()
    finally:
        dataset.close()

    # One file per created month of the versions, written a month at a time (memory).
    months = {p.parent.name for p in (data_dir / "operation_versions").glob("*/*.parquet")}
    assert len(months) == 2
    assert len(list((data_dir / "summary").glob("*.parquet"))) == len(months)
    record = recorded_summary(data_dir)
    assert record == derived_summary(data_dir)
    assert sum(r[6] for r in record if r[1] == "group") == 542  # every version, latest or not
    assert reports(data_dir, windows) == before

    dataset = Dataset(data_dir)  # once: a second recovery writes nothing more
    try:
        dataset.recover()
    finally:
        dataset.close()
    assert len(list((data_dir / "summary").glob("*.parquet"))) == len(months)


@pytest.mark.parametrize("commit_rows", [20, 100_000])  # commits of rows, or rows written ahead
def test_each_commit_records_the_summary_of_its_versions(
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

    assert recorded_summary(data_dir) == derived_summary(data_dir)
    windows = windows_of(data_dir)
    reference = without_record(data_dir, tmp_path / "reference")
    assert reports(data_dir, windows) == reports(reference, windows)


# The merge reads this many rows at a time into each action's merged rows: the default (one
# step here), and a few rows (many steps, every action's rows merged again and again).
@pytest.mark.parametrize("merge_rows", [dataset_module._SUMMARY_MERGE_ROWS, 7])
def test_compaction_merges_the_summary_and_keeps_its_sums(
    make_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, merge_rows: int
) -> None:
    """A month's summary files (one per commit) are merged, whatever their size, once it has
    SUMMARY_MERGE_FILES of them, by summing rows of the same key: fewer rows, the same
    figures."""
    monkeypatch.setattr(dataset_module, "_SUMMARY_MERGE_ROWS", merge_rows)
    sim = make_sim(
        seed=11,
        projects=1,
        shared_projects=0,
        days=3,
        ops_per_project_per_day=40,
        live_ops_per_project_per_hour=60,
    )
    data_dir = tmp_path / "data"
    for _ in range(SUMMARY_MERGE_FILES + 1):
        run_sync(sim, data_dir, page_size=20, commit_rows=20, compact=False)
        sim.advance(600)
    before = recorded_summary(data_dir)
    dataset = Dataset(data_dir)
    try:
        months = {
            partition: files
            for partition, files in dataset.state.live_files_by_partition().items()
            if partition.startswith("summary/created_month=")
        }
        rows_before = sum(rows for files in months.values() for _, rows in files)
        assert max(len(files) for files in months.values()) >= SUMMARY_MERGE_FILES
        assert dataset.compact() >= SUMMARY_MERGE_FILES - 1  # the month's files, whatever size
        dataset.collect_garbage()
        merged = {
            partition: files
            for partition, files in dataset.state.live_files_by_partition().items()
            if partition.startswith("summary/created_month=")
        }
    finally:
        dataset.close()
    assert [len(merged[m]) for m in months if len(months[m]) >= SUMMARY_MERGE_FILES] == [
        1 for m in months if len(months[m]) >= SUMMARY_MERGE_FILES
    ]
    assert sum(rows for files in merged.values() for _, rows in files) < rows_before
    assert recorded_summary(data_dir) == before == derived_summary(data_dir)


def test_the_merge_keeps_each_kind_of_row_in_its_columns_and_refuses_others() -> None:
    """Compaction's merge keeps a "group" row in its project, branch and counts and a histogram
    row in its ms and count (the other columns are NULL by the record's format): merged one row
    at a time, the rows equal `merge_summaries` of them all; a histogram row with a project
    (which the merge would lose) stops it."""
    at = dt.datetime(2026, 9, 1, tzinfo=UTC)
    group = {"month": 202609, "measure": "group", "project_id": "p", "branch_id": "b"}
    counts = {"failed": 1, "retries": 2, "terminal": 1}
    rows = [
        {
            **group,
            "action": "a",
            "versions": 2,
            **counts,
            "first_created_at": at,
            "last_created_at": at,
        },
        {
            **group,
            "action": "a",
            "versions": 1,
            "failed": 0,
            "retries": 0,
            "terminal": None,
            "first_created_at": at - dt.timedelta(days=1),
            "last_created_at": at,
        },
        {
            **group,
            "action": None,
            "versions": 1,
            **counts,
            "first_created_at": at,
            "last_created_at": at + dt.timedelta(days=1),
        },
        {"month": 202609, "measure": "total_ms", "action": "a", "ms": 5, "versions": 2},
        {"month": 202609, "measure": "total_ms", "action": "a", "ms": 5, "versions": 3},
        {"month": 202609, "measure": "total_ms", "action": "a", "ms": 6, "versions": 1},
        {"month": 202609, "measure": "wall_ms", "action": "a", "ms": 5, "versions": 4},
        {"month": 202608, "measure": "wall_ms", "action": "a", "ms": 5, "versions": 4},
    ]
    table = pa.Table.from_pylist(rows, schema=SUMMARY_SCHEMA)
    everything = [(c, "ascending") for c in SUMMARY_SCHEMA.names]
    merged = pa.concat_tables(merged_summary(table.to_batches(max_chunksize=1), step=1))
    expected = merge_summaries([table]).sort_by(everything)
    assert merged.sort_by(everything).to_pylist() == expected.to_pylist()
    assert merged.num_rows == 6

    odd = pa.Table.from_pylist([{**rows[3], "project_id": "p"}], schema=SUMMARY_SCHEMA)
    with pytest.raises(StorageError, match="rows of measure 'total_ms' with values"):
        list(merged_summary(pa.concat_tables([table, odd]).to_batches(), step=1))


def test_quantiles_from_the_histograms_are_quantile_cont_to_the_last_bit(tmp_path: Path) -> None:
    """Durations whose interpolated quantiles DuckDB rounds as a fused multiply-add would (the
    plain arithmetic differs in the last bit for some): the report from the summary equals the
    report from every version, byte for byte."""
    rng = random.Random(5)
    start = dt.datetime(2026, 9, 1, tzinfo=UTC)
    rows = []
    for i in range(20_000):
        created = start + dt.timedelta(seconds=rng.randrange(60 * 86_400))
        action = f"action_{i % 7}"
        rows.append(
            {
                "id": f"op-{i}",
                "project_id": f"p-{i % 3}",
                "branch_id": f"br-{i % 5}",
                "action": action,
                "status": "finished",
                "failures_count": 0,
                "created_at": created,
                "updated_at": created + dt.timedelta(milliseconds=rng.randrange(400_000)),
                "total_duration_ms": rng.randrange(400_000),
                "raw": "{}",
                "version": 1,
                "observed_at": created,
                "run_id": "r",
                "created_date": created.date(),
            }
        )
    table = pa.Table.from_pylist(rows, schema=VERSIONS_SCHEMA)
    data_dir = tmp_path / "data"
    dataset = Dataset(data_dir)
    try:
        dataset.recover()
        dataset.commit(table, "t", "run-1", lambda con: None)
    finally:
        dataset.close()
    assert recorded_summary(data_dir) == derived_summary(data_dir)  # the commit's own rows
    windows = [{}, {"since": start + dt.timedelta(days=30)}]
    reference = without_record(data_dir, tmp_path / "reference")
    assert reports(data_dir, windows) == reports(reference, windows)
    assert summary_of(table).num_rows > 10_000  # exact histograms, not buckets


def test_a_report_of_all_time_reads_the_total_of_the_summary_files_committed_now(
    make_sim: Any, tmp_path: Path
) -> None:
    """After each sync the summary's total over every month is the sum of exactly the committed
    summary files (named by them): a report of all time reads it, and reads what a scan of every
    version reads, in every window; a total of other files (one the next commits outdated) is
    never read: without the current one the report reads the months."""
    sim = make_sim(
        seed=13,
        projects=2,
        shared_projects=0,
        days=70,
        ops_per_project_per_day=10,
        live_ops_per_project_per_hour=40,
    )
    data_dir = tmp_path / "data"
    totals: list[str] = []
    committed: list[str] = []
    # The first total sums every file; the next ones add the files committed since to the one
    # before; the last follows a compaction that merged a month's files (SUMMARY_MERGE_FILES of
    # them) the one before summed: it sums every file again.
    for i, compact in enumerate([False] * SUMMARY_MERGE_FILES + [True]):
        before = set(committed)
        summary = run_sync(sim, data_dir, page_size=20, commit_rows=20, compact=compact)
        assert summary.outcome == "ok"
        sim.advance(900)
        committed = committed_summary(data_dir) or []
        assert (before <= set(committed)) is (not compact)
        total = data_dir / summary_total_file(committed)
        assert total.is_file()
        totals.append(total.name)
        # The total before it is kept (a report may have connected to it), older ones not.
        assert sorted(p.name for p in total.parent.glob("*")) == sorted(totals[-2:])
        across_months = "(SELECT * REPLACE (NULL::INTEGER AS month) FROM read_parquet(?))"
        months = [str(data_dir / f) for f in committed]
        assert duckdb.execute(
            _MERGED.format(source="read_parquet(?)"), [str(total)]
        ).fetchall() == (duckdb.execute(_MERGED.format(source=across_months), [months]).fetchall())
        con = connect(data_dir, only=REPORT_SQL)
        try:
            assert totalled(con)
        finally:
            con.close()
        if i in (0, SUMMARY_MERGE_FILES - 1, SUMMARY_MERGE_FILES):
            # The reports of a total summed from every file, of one added to, and of one
            # summed again after the compaction (each a scan of every version to compare
            # with, so not after every sync: CI's time).
            windows = windows_of(data_dir)
            reference = without_record(data_dir, tmp_path / f"reference-{i}")
            assert reports(data_dir, windows) == reports(reference, windows)
    assert len(set(totals)) == len(totals)  # each sync committed summary files: a new total
    total.unlink()  # the total of the files committed now gone: the older one is not read
    con = connect(data_dir, only=REPORT_SQL)
    try:
        assert not totalled(con)
    finally:
        con.close()
    assert reports(data_dir, windows) == reports(reference, windows)


@pytest.mark.parametrize("damage", ["not-parquet", "other-columns"])
def test_a_damaged_total_is_summed_again_from_every_file(
    make_sim: Any, tmp_path: Path, damage: str
) -> None:
    """The total the next one would add to is damaged (a copy of the directory cut short, or a
    file of other columns under its name, naming the files committed): the next sync sums every
    committed file instead of failing to write a total for ever (reports would read the months
    at every run)."""
    sim = make_sim(
        seed=5,
        projects=2,
        shared_projects=0,
        days=40,
        ops_per_project_per_day=10,
        live_ops_per_project_per_hour=40,
    )
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir, page_size=20, commit_rows=20).outcome == "ok"
    committed = committed_summary(data_dir) or []
    damaged = data_dir / summary_total_file(committed)
    if damage == "not-parquet":
        damaged.write_bytes(b"PAR1")
    else:
        names = "\n".join(sorted(committed))
        duckdb.execute(
            f"COPY (SELECT 1 AS x) TO '{damaged}' (FORMAT parquet, KV_METADATA {{files: '{names}'}})"
        )
    sim.advance(900)
    assert run_sync(sim, data_dir, page_size=20, commit_rows=20).outcome == "ok"
    committed = committed_summary(data_dir) or []
    total = data_dir / summary_total_file(committed)
    assert total != damaged and total.is_file()
    across_months = "(SELECT * REPLACE (NULL::INTEGER AS month) FROM read_parquet(?))"
    months = [str(data_dir / f) for f in committed]
    assert duckdb.execute(_MERGED.format(source="read_parquet(?)"), [str(total)]).fetchall() == (
        duckdb.execute(_MERGED.format(source=across_months), [months]).fetchall()
    )
