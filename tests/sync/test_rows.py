"""The state's `projects` and `sync_runs` rows cross modules as named records (issue 20):
`ProjectRow` / `RunRow` name the columns of the tables readers see, and carry what the run did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.core.model import ProjectRow, RunRow
from exporter.core.tables import PROJECTS_SCHEMA, SYNC_RUNS_SCHEMA
from exporter.store.state import StateDB

from .conftest import run_sync


def test_the_records_name_the_columns_of_their_tables_in_order() -> None:
    assert ProjectRow._fields == tuple(PROJECTS_SCHEMA.names)
    assert RunRow._fields == tuple(SYNC_RUNS_SCHEMA.names)


def test_the_rows_carry_what_the_run_did(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=43, projects=2, days=1, ops_per_project_per_day=40)
    summary = run_sync(sim, tmp_path)
    state = StateDB(tmp_path / "state.sqlite", read_only=True)
    try:
        runs, projects = state.runs_rows(), state.projects_rows()
    finally:
        state.close()
    (run,) = runs
    assert (run.run_id, run.outcome) == (summary.run_id, "ok")
    assert run.finished_at is not None and run.started_at < run.finished_at
    assert (run.projects_total, run.projects_ok, run.projects_failed) == (
        summary.projects_total,
        summary.projects_ok,
        0,
    )
    assert (run.requests, run.new_operations, run.changed_operations) == (
        summary.requests,
        len(sim.ground_truth()),
        0,
    )
    assert [p.id for p in projects] == sorted(sim.project_ids())
    for p in projects:
        assert p.deleted_at is None and p.last_error is None
        assert p.last_synced_at is not None and p.last_synced_at <= run.finished_at
        truth = [o for o in sim.ground_truth().values() if o["project_id"] == p.id]
        still_open = [o for o in truth if o["status"] not in ("finished", "cancelled", "skipped")]
        assert p.open_operations == len(still_open)
