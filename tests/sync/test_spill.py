"""Rows written ahead of their commit (issue 24, exporter/store/local/spill.py): a local commit
holds up to `spill_rows` versions at the memory of one chunk, so a backfill writes one file per
month per commit and its end needs no compaction rewrite."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import orjson
import pyarrow.parquet as pq

from exporter.store.base import COMPACT_MIN_FILES
from exporter.store.local.reader import committed_files

from .conftest import assert_matches_truth, run_sync


def files(data_dir: Path) -> list[tuple[str, int, str]]:
    """(partition, rows, run_id) of every live file the state lists."""
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return sorted(con.execute("SELECT partition, rows, run_id FROM files WHERE state = 'live'"))
    finally:
        con.close()


def test_a_backfill_writes_its_months_whole_and_compacts_nothing(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=5, projects=3, shared_projects=0, days=70, ops_per_project_per_day=20)
    data_dir = tmp_path / "data"
    # commit_rows=20 alone would make ~210 commits: over COMPACT_MIN_FILES files a month.
    summary = run_sync(sim, data_dir, commit_rows=20, commit_seconds=60, page_size=50)
    assert summary.outcome == "ok"
    assert_matches_truth(sim, data_dir)
    live = files(data_dir)
    months = [p for p, _, _ in live if p.startswith("created_month=")]
    runs = {run for p, _, run in live if p in months}
    assert runs == {summary.run_id}  # the backfill's own files: no compaction output
    assert len(months) == len(set(months)) >= 3  # one file per month: the one commit's
    assert sum(rows for p, rows, _ in live if p in months) == summary.versions_written
    assert summary.versions_written == len(sim.ground_truth(None)) > 20 * COMPACT_MIN_FILES


def test_with_events_rows_are_written_ahead_and_each_makes_one_event(
    make_sim: Any, tmp_path: Path
) -> None:
    """An events backfill makes the commits of one without (issue 22, bench/README.md figure 9):
    the rows go ahead of the commit, each chunk keeps what its outbox row needs, and the events
    file still gets one event per version (none lost to rows that left their chunk), built
    from the rows the commit had in hand, the same bytes as built later from the files."""
    from exporter.events.outbox import EventsConfig

    sim = make_sim(seed=5, projects=3, shared_projects=0, days=70, ops_per_project_per_day=20)
    data_dir = tmp_path / "data"
    events = EventsConfig(file=tmp_path / "events.jsonl", backfill=True)
    summary = run_sync(
        sim, data_dir, commit_rows=20, commit_seconds=60, events=events, page_size=50
    )
    assert summary.outcome == "ok"
    assert_matches_truth(sim, data_dir)
    live = files(data_dir)
    months = [p for p, _, _ in live if p.startswith("created_month=")]
    assert len(months) == len(set(months)) >= 3  # one file per month: the one commit's
    assert sum(rows for p, rows, _ in live if p in months) == summary.versions_written
    assert summary.versions_written == len(sim.ground_truth(None)) > 20 * COMPACT_MIN_FILES
    lines = (tmp_path / "events.jsonl").read_bytes().splitlines(keepends=True)
    ids = [orjson.loads(line)["id"] for line in lines]
    committed = [data_dir / f for f in committed_files(data_dir) or [] if "created_month=" in f]
    rows = pq.read_table(committed, columns=["id", "version"]).to_pylist()
    assert len(ids) == len(set(ids)) == len(rows)
    assert sorted(ids) == sorted(f"{r['id']}:{r['version']}" for r in rows)
    assert summary.events_pending == 0 and summary.events_delivered == len(ids)


def test_events_waiting_for_their_commit_are_bounded(make_sim: Any, tmp_path: Path) -> None:
    """Rows written ahead, a chunk still keeps its events' columns until the commit: a commit
    comes once commit_events of them wait (their memory), whatever spill_rows allows."""
    from exporter.events.outbox import EventsConfig

    sim = make_sim(seed=6, projects=2, shared_projects=0, days=20, ops_per_project_per_day=10)
    data_dir = tmp_path / "data"
    events = EventsConfig(file=tmp_path / "events.jsonl", backfill=True)
    summary = run_sync(
        sim, data_dir, commit_events=50, commit_seconds=60, events=events, page_size=20
    )
    assert summary.outcome == "ok"
    assert_matches_truth(sim, data_dir)
    versions = [rows for p, rows, _ in files(data_dir) if p.startswith("created_month=")]
    # A commit: fewer than commit_events, then one chunk (at most 3 pages of 20: page_size).
    assert max(versions) < 50 + 60 and sum(versions) == summary.versions_written > 3 * 110
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == summary.versions_written
