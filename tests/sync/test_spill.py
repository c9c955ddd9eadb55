"""Rows written ahead of their commit (issue 24, exporter/store/local/spill.py): a local commit
holds up to `spill_rows` versions at the memory of one chunk, so a backfill writes one file per
month per commit and its end needs no compaction rewrite."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from exporter.store.base import COMPACT_MIN_FILES

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


def test_with_events_rows_go_with_the_commit(make_sim: Any, tmp_path: Path) -> None:
    """The outbox reads each chunk's rows in the commit's transaction: no writing ahead, the
    rows wait in memory, commit_rows at a time (the former path, still exact)."""
    from exporter.events.outbox import EventsConfig

    sim = make_sim(seed=6, projects=2, shared_projects=0, days=20, ops_per_project_per_day=10)
    data_dir = tmp_path / "data"
    events = EventsConfig(file=tmp_path / "events.jsonl", backfill=True)
    summary = run_sync(
        sim, data_dir, commit_rows=50, commit_seconds=60, events=events, page_size=20
    )
    assert summary.outcome == "ok"
    assert_matches_truth(sim, data_dir)
    versions = [rows for p, rows, _ in files(data_dir) if p.startswith("created_month=")]
    # A commit: fewer than commit_rows, then one chunk (at most 3 pages of 20: page_size).
    assert max(versions) < 50 + 60
    assert sum(versions) == summary.versions_written
    # one event per version (backfill events on): none lost to rows that left their chunk
    lines = (tmp_path / "events.jsonl").read_text().splitlines()
    assert len(lines) == summary.versions_written
