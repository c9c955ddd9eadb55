"""One deterministic regression test per issue-9 finding that the simulator can show.

Each test is the "failing test first" of its finding: it states the exactness the product
promises (PRODUCT.md, correctness properties) on the path the review found broken.
"""

from __future__ import annotations

import math
import sqlite3
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

from exporter.api.client import RetryPolicy
from exporter.engine.walk import MAX_MISSES, RETENTION_US, WalkLimits

from .conftest import (
    assert_matches_truth,
    assert_no_identical_versions,
    empty_project_sim,
    latest_raw,
    run_sync,
    sim_clock,
)

# Fail fast where a test wants a request to fail for good.
ONE_TRY = RetryPolicy(max_attempts=1, backoff_initial=0.01, backoff_max=0.01)
TWO_TRIES = RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.01)


def _now_start() -> str:
    """A simulator clock at the wall clock: "freshly finished" means what it means for real."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _deep_open_ops(sim: Any, pid: str, n_open: int, n_above: int, status: str) -> list[str]:
    """n_open open operations (one per second, returned oldest first) under n_above finished
    ones: with a small page size the walk of a later run does not reach them."""
    sim.advance(1)
    open_ids = sim.add_operations(pid, n_open, status=status, same_second=False)
    sim.advance(1)
    sim.add_operations(pid, n_above, same_second=False)
    sim.advance(1)
    return open_ids


def _state(data_dir: Path, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


def _projects(data_dir: Path) -> dict[str, dict[str, Any]]:
    rel = duckdb.sql(f"SELECT * FROM read_parquet('{data_dir}/projects/projects.parquet')")
    cols = [d[0] for d in rel.description]
    return {row[0]: dict(zip(cols, row)) for row in rel.fetchall()}


def _sync_runs(data_dir: Path) -> list[dict[str, Any]]:
    rel = duckdb.sql(
        f"SELECT * FROM read_parquet('{data_dir}/sync_runs/sync_runs.parquet') ORDER BY started_at"
    )
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, row)) for row in rel.fetchall()]


# -- finding 1: open operations starve -----------------------------------------------------------


def test_1_unchanged_gets_advance_the_rotation(make_sim: Any, tmp_path: Path) -> None:
    """Many open operations, few GETs per run: the rotation must move on when a GET finds an
    operation unchanged, so the least recently checked ones are reached within
    ceil(open / max_gets) + 1 runs."""
    sim, pid = empty_project_sim(make_sim, seed=91)
    n_open, max_gets = 12, 3
    open_ids = _deep_open_ops(sim, pid, n_open, 10, "failed")
    limits = WalkLimits(page_size=5, flush_rows=5, max_extend_pages=0, max_gets=max_gets)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    # The backfill read the open operations newest first, so the oldest ones were checked last;
    # exactly those finish now (as in the review: 520 stuck `failed`, the 20 oldest finish).
    sim.advance(5)
    for op_id in open_ids[:max_gets]:
        sim.update_operation(op_id, status="finished", total_duration_ms=4242)
    runs = math.ceil(n_open / max_gets) + 1
    for _ in range(runs):
        assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    latest = latest_raw(tmp_path)
    stale = [i for i in open_ids[:max_gets] if latest[i]["status"] != "finished"]
    assert not stale, f"{len(stale)} finished operations still stored as failed after {runs} runs"
    assert_matches_truth(sim, tmp_path)


def test_1_every_exit_0_sync_is_current_however_many_open_operations(
    make_sim: Any, tmp_path: Path
) -> None:
    """With the default limits a sync that exits 0 has re-read every open operation: 600 open
    ones spread 12 apart (GETs are the cheapest refresh) all finish, and one sync brings every
    one of them (was: 500 GETs per project and run, 5,000 per account, the rest a run later)."""
    sim, pid = empty_project_sim(make_sim, seed=94)
    open_ids = []
    for _ in range(600):
        sim.add_operations(pid, 11, same_second=False)
        open_ids += sim.add_operations(pid, 1, status="running", same_second=False)
        sim.advance(1)
    assert run_sync(sim, tmp_path).outcome == "ok"  # backfill at the default page size
    sim.advance(60)
    sim.add_operations(pid, 20, same_second=False)
    for op_id in open_ids:
        sim.update_operation(op_id, status="finished", total_duration_ms=17)
    summary = run_sync(sim, tmp_path, page_size=10)
    assert summary.outcome == "ok"
    # The cheapest plan: one GET each (extending would take 720 pages), but for the newest one,
    # which the walk's last page (the one that reaches the checkpoint) holds.
    assert summary.gets == 599
    assert_matches_truth(sim, tmp_path)


# -- finding 3: an out-of-order fractional created_at is skipped ------------------------------------


@pytest.mark.parametrize("page_size", [2, 3, 4])
@pytest.mark.parametrize("fractional", [1, 2, 3])
def test_3_fractional_created_at_among_whole_seconds_is_kept(
    make_sim: Any, tmp_path: Path, page_size: int, fractional: int
) -> None:
    """The API once sent `...08.841+02:00` among whole-second neighbours: parsed, it sorts after
    operations listed before it. No operation the API returned may be dropped, at a page
    boundary or inside a page, in a backfill or an incremental walk."""
    sim = make_sim(
        seed=93, projects=1, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=15
    )
    pid = sim.project_ids()[0]
    run_sync(sim, tmp_path / "incremental", page_size=page_size)
    for step in range(2):  # a burst with one fractional op, twice: boundaries move
        sim.advance(1)
        burst = sim.add_operations(pid, 5, same_second=True)
        sim.fractional_created_at(burst[fractional - step])
        sim.advance(1)
        sim.add_operations(pid, step + 1, same_second=True)
    assert any("+02:00" in o["created_at"] for o in sim.ground_truth([pid]).values())
    for data_dir in (tmp_path / "incremental", tmp_path / "backfill"):
        summary = run_sync(sim, data_dir, page_size=page_size)
        assert summary.outcome == "ok", summary.errors
        assert_matches_truth(sim, data_dir)
        assert_no_identical_versions(data_dir)


# -- finding 4: a failed /projects/shared listing is swallowed -------------------------------------


def test_4_failing_shared_listing_makes_the_run_partial(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=94, projects=2, shared_projects=1, days=1, ops_per_project_per_day=20)
    sim.fail_requests("/projects/shared", 503)
    summary = run_sync(sim, tmp_path, retry=TWO_TRIES)
    assert summary.outcome == "partial" and summary.exit_code == 1, (
        summary.outcome,
        summary.errors,
        summary.error,
    )
    named = " ".join([*summary.errors, *summary.errors.values(), summary.error or ""])
    assert "shared" in named, f"the failed shared listing is not named: {named!r}"
    [run] = _sync_runs(tmp_path)
    assert run["outcome"] == "partial" and "shared" in (run["error"] or "")
    # The organizations' projects were still synced.
    assert_matches_truth(sim, tmp_path, sim.project_ids(sim.org_ids[0]))


# -- finding 5: shared projects that disappear are never marked deleted -------------------------------


def test_5_vanished_shared_project_is_marked_deleted(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=95, projects=1, shared_projects=1, days=1, ops_per_project_per_day=20)
    run_sync(sim, tmp_path)
    [shared] = sim.project_ids(sim.world.foreign_org)
    added = sim.add_project(shared=True)  # shared while opsaudit runs, then unshared
    assert run_sync(sim, tmp_path).outcome == "ok"
    history = {k for k in latest_raw(tmp_path) if k in sim.ground_truth([shared, added])}
    sim.delete_project(shared)
    sim.delete_project(added)
    assert run_sync(sim, tmp_path).outcome == "ok"
    projects = _projects(tmp_path)
    for pid in (shared, added):
        assert projects[pid]["deleted_at"] is not None, f"shared project {pid} not marked deleted"
    assert history <= set(latest_raw(tmp_path))  # and its history is kept
    assert projects[sim.project_ids(sim.org_ids[0])[0]]["deleted_at"] is None


# -- finding 8: last_error of a failed project is wiped -----------------------------------------------


def test_8_last_error_of_a_failed_project_survives(make_sim: Any, tmp_path: Path) -> None:
    """The walk completes (its checkpoint chunk is queued), then refreshing an open operation
    fails: the project's error must still be in the state and in `projects` after the run."""
    sim = make_sim(
        seed=98, projects=2, shared_projects=0, orgs=1, days=0, ops_per_project_per_day=0
    )
    pid, other = sim.project_ids()
    [op_id] = _deep_open_ops(sim, pid, 1, 8, "failed")
    sim.add_operations(other, 3)
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    sim.fail_requests(f"/operations/{op_id}", 500)
    # Commit late: the completed-checkpoint chunk is applied after the error was recorded.
    summary = run_sync(sim, tmp_path, limits=limits, retry=ONE_TRY, commit_seconds=30)
    assert summary.outcome == "partial" and pid in summary.errors, summary.errors
    [(last_error,)] = _state(tmp_path, "SELECT last_error FROM projects WHERE id = ?", (pid,))
    assert last_error, "last_error was wiped in the state"
    assert _projects(tmp_path)[pid]["last_error"], "last_error missing from projects.parquet"


# -- finding 12: inclusive cursors -----------------------------------------------------------------


def test_12_resumed_walk_is_exact_with_an_inclusive_cursor(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(
        seed=912,
        projects=1,
        shared_projects=0,
        orgs=1,
        days=1,
        ops_per_project_per_day=60,
        inclusive_cursor=True,
    )
    pid = sim.project_ids()[0]
    limits = WalkLimits(page_size=5, flush_rows=5)
    # The listing fails for good after 4 pages: the walk's progress is committed with a cursor.
    sim.fail_requests(f"/projects/{pid}/operations", 503, after=4)
    first = run_sync(sim, tmp_path, limits=limits, retry=ONE_TRY)
    assert first.outcome != "ok"
    [(cursor,)] = _state(tmp_path, "SELECT resume_cursor FROM projects WHERE id = ?", (pid,))
    assert cursor, "no progress committed: the test did not interrupt a walk"
    sim.clear_failures()
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    assert_no_identical_versions(tmp_path)
    assert_matches_truth(sim, tmp_path)
    # And a walk that was never interrupted is exact too.
    assert run_sync(sim, tmp_path / "fresh", limits=limits).outcome == "ok"
    assert_no_identical_versions(tmp_path / "fresh")
    assert_matches_truth(sim, tmp_path / "fresh")


# -- finding 14: a transient 404 on one operation's GET ----------------------------------------------


def test_14_transient_404_does_not_stop_tracking(make_sim: Any, tmp_path: Path) -> None:
    sim, pid = empty_project_sim(make_sim, seed=914)
    [op_id] = _deep_open_ops(sim, pid, 1, 8, "running")
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    sim.advance(10)
    sim.update_operation(op_id, status="finished", total_duration_ms=10_000)
    sim.fail_requests(f"/operations/{op_id}", 404, times=1)
    run_sync(sim, tmp_path, limits=limits)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    assert latest_raw(tmp_path)[op_id]["status"] == "finished", "no longer tracked after one 404"
    assert_matches_truth(sim, tmp_path)


def test_14_repeated_404s_of_a_young_operation_do_not_stop_tracking(
    make_sim: Any, tmp_path: Path
) -> None:
    """Three runs in a row (here in the same second) whose GET of one open operation answers
    404 once each: the operation, a minute old, is no candidate for retention; it stays tracked
    and its later change is stored (the stateful test found it dropped, its row stale)."""
    sim, pid = empty_project_sim(make_sim, seed=914, start=_now_start())
    [op_id] = _deep_open_ops(sim, pid, 1, 8, "error")
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    clock = sim_clock(sim)
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    for misses in range(1, MAX_MISSES + 2):
        sim.fail_requests(f"/operations/{op_id}", 404, times=1)
        assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
        sim.clear_failures()
        tracked = _state(tmp_path, "SELECT misses FROM open_ops WHERE id = ?", (op_id,))
        assert tracked == [(misses,)], f"after {misses} 404s in a row: {tracked}"
    sim.advance(60)
    sim.update_operation(op_id, status="finished", total_duration_ms=10_000)
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    assert latest_raw(tmp_path)[op_id]["status"] == "finished"
    assert_matches_truth(sim, tmp_path)


def test_14_an_operation_past_retention_that_keeps_answering_404_is_dropped(
    make_sim: Any, tmp_path: Path
) -> None:
    """Older than retention, 404 in MAX_MISSES runs in a row: deleted by the platform, no
    longer tracked (no GET per run for good); its history stays."""
    sim, pid = empty_project_sim(make_sim, seed=915, start=_now_start())
    [op_id] = _deep_open_ops(sim, pid, 1, 8, "running")
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    clock = sim_clock(sim)
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    sim.advance(RETENTION_US / 1e6)
    sim.fail_requests(f"/operations/{op_id}", 404)
    for misses in range(1, MAX_MISSES):
        assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
        tracked = _state(tmp_path, "SELECT misses FROM open_ops WHERE id = ?", (op_id,))
        assert tracked == [(misses,)], f"after {misses} 404s in a row: {tracked}"
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    assert _state(tmp_path, "SELECT id FROM open_ops") == []
    assert latest_raw(tmp_path)[op_id]["status"] == "running"


# -- finding 17: terminal operations that change in place ------------------------------------------


@pytest.mark.parametrize("deep", [False, True], ids=["walked", "fetched"])
def test_17_in_place_change_right_after_finishing_is_stored(
    make_sim: Any, tmp_path: Path, deep: bool
) -> None:
    """The API filled total_duration_ms (0 -> 31) with the same updated_at after an operation
    finished: the final state is the one stored."""
    sim, pid = empty_project_sim(make_sim, seed=917, start=_now_start())
    if deep:
        [op_id] = _deep_open_ops(sim, pid, 1, 8, "running")
    else:
        sim.advance(1)
        [op_id] = sim.add_operations(pid, 1, status="running")
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    sim.advance(2)
    sim.update_operation(op_id, status="finished", total_duration_ms=0)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    finished = latest_raw(tmp_path)[op_id]
    assert finished["status"] == "finished" and finished["total_duration_ms"] == 0
    sim.update_operation(op_id, total_duration_ms=31, updated_at=finished["updated_at"])
    for _ in range(2):
        assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    stored = latest_raw(tmp_path)[op_id]
    assert stored["total_duration_ms"] == 31, f"stored {orjson.dumps(stored).decode()}"
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def test_4_one_organizations_failing_listing_makes_the_run_partial(
    make_sim: Any, tmp_path: Path
) -> None:
    """One organization's listing fails: the others' projects and the shared ones are synced,
    the run is partial (exit 1) naming it, not failed with nothing synced (exit 5); every
    organization's failing is discovery failing."""
    sim = make_sim(
        seed=95, projects=4, shared_projects=1, orgs=2, days=1, ops_per_project_per_day=20
    )
    broken, healthy = sim.org_ids
    sim.fail_requests(f"/projects?org_id={broken}", 503)
    summary = run_sync(sim, tmp_path, retry=TWO_TRIES)
    assert (summary.outcome, summary.exit_code) == ("partial", 1), summary.error
    assert summary.errors[""].startswith(f"listing the projects of organization {broken} failed: ")
    assert_matches_truth(
        sim, tmp_path, [*sim.project_ids(healthy), *sim.project_ids(sim.world.foreign_org)]
    )
    sim.fail_requests(f"/projects?org_id={healthy}", 503)
    summary = run_sync(sim, tmp_path / "every", retry=TWO_TRIES)
    assert (summary.outcome, summary.exit_code) == ("failed", 5), summary.error


def test_a_personal_key_in_no_organization_syncs_the_projects_shared_with_it(
    make_sim: Any, tmp_path: Path
) -> None:
    """A user in no organization: its key lists projects without `org_id`, and others may share
    theirs with it (`GET /projects/shared`): all of them are synced (0 operations and exit 0
    before)."""
    sim = make_sim(
        seed=96, projects=2, shared_projects=1, orgs=0, days=1, ops_per_project_per_day=20
    )
    assert len(sim.project_ids()) == 3
    summary = run_sync(sim, tmp_path)
    assert (summary.outcome, summary.exit_code) == ("ok", 0), summary.error
    assert_matches_truth(sim, tmp_path)
