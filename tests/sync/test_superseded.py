"""The superseded record (issue 24, DESIGN.md): the commit that adds version n+1 of an operation
records (id, n) in `superseded/`, and `operations` is the versions minus that record. A dataset
written before it is migrated once by the next sync's recovery, and every view reads the same
rows before and after."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path
from typing import Any

import duckdb

from exporter.analytics.views import connect, list_views
from exporter.store.local.dataset import Dataset

from .conftest import assert_matches_truth, run_sync

# Written by opsaudit at commit 6b60eef (state format 6, before the record):
# tests/assets/make_pre_superseded.py says how. 542 versions of 521 operations.
PRE_SUPERSEDED = Path(__file__).parents[1] / "assets" / "pre-superseded"


def every_view(data_dir: Path) -> dict[str, list[tuple[Any, ...]]]:
    """Every view's rows, every column, in a stable order. `age` (stuck operations) is measured
    from the moment of the query, so it is left out of the comparison."""
    con = connect(data_dir)
    try:
        out = {}
        for name in list_views():
            columns = [c[0] for c in con.execute(f"DESCRIBE {name}").fetchall() if c[0] != "age"]
            select = ", ".join(f'"{c}"' for c in columns)
            rows = con.execute(f"SELECT {select} FROM {name}").fetchall()
            out[name] = sorted(rows, key=repr)
        return out
    finally:
        con.close()


def recorded(data_dir: Path) -> list[tuple[str, int]]:
    """The record's rows, read from the files the state lists."""
    state = sqlite3.connect(data_dir / "state.sqlite")
    try:
        files = [
            str(data_dir / path)
            for (path,) in state.execute(
                "SELECT path FROM files WHERE state = 'live' AND path LIKE 'superseded/%'"
            )
        ]
        flag = state.execute("SELECT value FROM meta WHERE key = 'superseded_recorded'").fetchone()
    finally:
        state.close()
    assert flag == ("1",)
    rows = duckdb.execute("SELECT id, version FROM read_parquet(?)", [files]).fetchall()
    return sorted(rows)


def derived(data_dir: Path) -> list[tuple[str, int]]:
    """What the record must hold: (id, version - 1) of every version after the first."""
    con = connect(data_dir)
    try:
        rows = con.execute(
            "SELECT id, version - 1 FROM operation_versions WHERE version > 1"
        ).fetchall()
    finally:
        con.close()
    return sorted(rows)


def test_a_dataset_written_before_the_record_reads_the_same_after_its_migration(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "data"
    shutil.copytree(PRE_SUPERSEDED, data_dir)
    before = every_view(data_dir)
    assert len(before["operation_versions"]) == 542
    assert len(before["operations"]) == 521
    assert not (data_dir / "superseded").exists()

    dataset = Dataset(data_dir)  # what a sync does first, under the lock: recover + migrate
    try:
        dataset.recover()
    finally:
        dataset.close()

    assert len(list((data_dir / "superseded").glob("*.parquet"))) == 1
    assert recorded(data_dir) == derived(data_dir)
    assert len(recorded(data_dir)) == 542 - 521
    after = every_view(data_dir)
    assert list(after) == list(before)
    for name, rows in before.items():
        assert after[name] == rows, name

    # Once: a second recovery writes nothing more.
    dataset = Dataset(data_dir)
    try:
        dataset.recover()
    finally:
        dataset.close()
    assert len(list((data_dir / "superseded").glob("*.parquet"))) == 1


def test_each_commit_records_what_its_later_versions_supersede(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(
        seed=7,
        projects=2,
        shared_projects=0,
        days=2,
        ops_per_project_per_day=60,
        live_ops_per_project_per_hour=40,
    )
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir, page_size=20, commit_rows=20).outcome == "ok"
    for _ in range(3):
        sim.advance(900)
        assert run_sync(sim, data_dir, page_size=20, commit_rows=20).outcome == "ok"

    record = recorded(data_dir)
    assert record == derived(data_dir)
    assert len(record) > 0  # operations that were open got later versions
    con = connect(data_dir)
    try:
        ids = con.execute("SELECT count(*), count(DISTINCT id) FROM operations").fetchone()
        versions = con.execute("SELECT count(DISTINCT id) FROM operation_versions").fetchone()
    finally:
        con.close()
    assert ids == (versions[0], versions[0])  # each operation exactly once
    assert_matches_truth(sim, data_dir)


def test_compaction_merges_the_record_and_keeps_it_whole(make_sim: Any, tmp_path: Path) -> None:
    """Many small record files (one per commit with later versions) are compacted like the
    versions; the merged record is the same set."""
    sim = make_sim(
        seed=11,
        projects=1,
        shared_projects=0,
        days=1,
        ops_per_project_per_day=40,
        live_ops_per_project_per_hour=60,
    )
    data_dir = tmp_path / "data"
    run_sync(sim, data_dir, page_size=20, commit_rows=20)
    for _ in range(4):
        sim.advance(600)
        run_sync(sim, data_dir, page_size=20, commit_rows=20)
    before = recorded(data_dir)
    dataset = Dataset(data_dir)
    try:
        files = dataset.state.live_files_by_partition()["superseded"]
        assert len(files) >= 2
        dataset._compact_files("superseded", [path for path, _ in files])
        dataset.collect_garbage()
        assert len(dataset.state.live_files_by_partition()["superseded"]) == 1
    finally:
        dataset.close()
    assert recorded(data_dir) == before == derived(data_dir)
