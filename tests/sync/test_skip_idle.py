"""Issue 19, findings 1 and 2: `--skip-idle` leaves a project only on this run's listing, and
never loses activity in its walk's own second."""

from __future__ import annotations

import sqlite3
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from exporter.core.timeutil import to_micros

from .conftest import assert_matches_truth, empty_project_sim, latest_raw, run_sync, sim_clock

OPS_ROUTE = "GET /projects/{project_id}/operations"


def _quiet_sim(make_sim: Any, seed: int, projects: int) -> Any:
    """Projects with one finished operation each, twenty minutes before the wall clock: a minute
    later (simulated) their listing marks are old enough to be idle."""
    start = datetime.now(timezone.utc) - timedelta(minutes=20)
    sim = make_sim(
        seed=seed,
        projects=projects,
        shared_projects=0,
        orgs=1,
        days=0,
        ops_per_project_per_day=0,
        live_ops_per_project_per_hour=0,
        start=start.strftime("%Y-%m-%dT%H:%M:%SZ"),
    )
    for pid in sim.project_ids():
        sim.add_operations(pid, 1, action="start_compute")
    return sim


def _walked_from(data_dir: Path) -> dict[str, int]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return dict(con.execute("SELECT id, walked_from_us FROM projects").fetchall())
    finally:
        con.close()


def test_skip_idle_leaves_only_projects_this_runs_listing_showed_idle(
    make_sim: Any, tmp_path: Path
) -> None:
    """Finding 1: `--project P --skip-idle` lists nothing, so P's stored activity mark is an
    earlier listing's: P is walked, and its new operations are stored."""
    sim = _quiet_sim(make_sim, 1901, projects=2)
    target = sorted(sim.project_ids())[0]
    assert run_sync(sim, tmp_path).outcome == "ok"
    # The idle baseline: with a listing, both projects are idle (nothing since their walks).
    sim.reset_stats()
    baseline = run_sync(sim, tmp_path, skip_idle=True)
    assert (baseline.outcome, baseline.projects_idle, baseline.projects_ok) == ("ok", 2, 0)
    assert sim.stats()["by_route"].get(OPS_ROUTE, 0) == 0
    sim.advance(1260)  # past the wall clock: this activity is after every walk so far
    new = sim.add_operations(target, 3, action="start_compute")
    sim.reset_stats()
    summary = run_sync(sim, tmp_path, skip_idle=True, project_ids=[target])
    assert (summary.outcome, summary.projects_idle, summary.projects_ok) == ("ok", 0, 1)
    assert sim.stats()["by_route"][OPS_ROUTE] == 1
    assert set(new) <= set(latest_raw(tmp_path))
    assert_matches_truth(sim, tmp_path, [target])


def test_skip_idle_walks_a_project_whose_activity_is_in_its_walks_own_second(
    make_sim: Any, tmp_path: Path
) -> None:
    """Finding 2: the listing's marks are whole seconds, the walk's start a microsecond instant
    of this host: an operation created in the walk's own second, after its first page, has a
    mark below the walk's start. The project is not idle: its operation is stored by the next
    `--skip-idle` run."""
    sim = _quiet_sim(make_sim, 1902, projects=1)
    [pid] = sim.project_ids()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert run_sync(sim, tmp_path, skip_idle=True).projects_idle == 1
    walked_from = _walked_from(tmp_path)[pid]
    # Put the simulated clock in the walk's own second, at its very start.
    target_us = walked_from // 1_000_000 * 1_000_000
    now_sim_us = to_micros(sim.clock)
    assert now_sim_us <= target_us
    sim.advance((target_us - now_sim_us) / 1e6)
    [late] = sim.add_operations(pid, 1, action="start_compute")
    assert sim.ground_truth()[late]["created_at"][:19] == time.strftime(
        "%Y-%m-%dT%H:%M:%S", time.gmtime(walked_from // 1_000_000)
    )
    summary = run_sync(sim, tmp_path, skip_idle=True)
    assert (summary.outcome, summary.projects_idle, summary.projects_ok) == ("ok", 0, 1)
    assert late in latest_raw(tmp_path)
    assert_matches_truth(sim, tmp_path)


def test_skip_idle_allows_for_clock_skew(make_sim: Any, tmp_path: Path) -> None:
    """Finding 2: activity half a minute before the walk's start (by this host's clock) may be
    after it by the API's: the project is walked, not left idle."""
    sim = _quiet_sim(make_sim, 1903, projects=1)
    [pid] = sim.project_ids()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert run_sync(sim, tmp_path, skip_idle=True).projects_idle == 1
    walked_from = _walked_from(tmp_path)[pid]
    sim.advance((walked_from - 30_000_000 - to_micros(sim.clock)) / 1e6)
    [skewed] = sim.add_operations(pid, 1, action="start_compute")
    summary = run_sync(sim, tmp_path, skip_idle=True)
    assert (summary.projects_idle, summary.projects_ok) == (0, 1)
    assert skewed in latest_raw(tmp_path)


def test_a_walk_resumed_by_a_budgeted_run_does_not_make_its_project_idle(
    make_sim: Any, tmp_path: Path
) -> None:
    """A walk a budget cut is resumed from its cursor and completed by the next run, whose
    budget then ends before the walk from the newest operation. That walk's start was taken
    for the project's last walk: operations created meanwhile looked older than it, and
    `--skip-idle` left the project idle, its new operations missing for up to
    --full-sweep-every while every run exited 0."""
    sim, pid = empty_project_sim(make_sim, seed=31)
    sim.add_operations(pid, 20, action="start_compute", same_second=False)
    sim.advance(3600)
    budgeted = {"page_size": 3, "skip_idle": True, "clock": sim_clock(sim)}
    assert run_sync(sim, tmp_path, max_requests=6, **budgeted).outcome == "budget"
    sim.advance(60)
    new = sim.add_operations(pid, 2, action="apply_config")
    sim.advance(240)
    assert run_sync(sim, tmp_path, max_requests=9, **budgeted).outcome == "budget"
    con = sqlite3.connect(tmp_path / "state.sqlite")
    try:
        [(cursor,)] = con.execute("SELECT resume_cursor FROM projects").fetchall()
    finally:
        con.close()
    assert cursor is None  # the resumed walk completed; the walk from the newest did not start
    sim.advance(300)
    summary = run_sync(sim, tmp_path, page_size=3, skip_idle=True, clock=sim_clock(sim))
    assert (summary.outcome, summary.projects_idle) == ("ok", 0)
    assert set(new) <= set(latest_raw(tmp_path))
    assert_matches_truth(sim, tmp_path)


def test_a_project_whose_names_are_due_is_never_idle(make_sim: Any, tmp_path: Path) -> None:
    """A run cut short before a project's branches and endpoints listings leaves them due ("a
    run cut short reads them first in the next one"): `--skip-idle` left the project idle, and
    a new branch's operations had no names for up to --full-sweep-every."""
    sim, pid = empty_project_sim(make_sim, seed=61)
    sim.add_operations(pid, 3, action="start_compute")
    sim.advance(3600)
    clock = sim_clock(sim)
    assert run_sync(sim, tmp_path, skip_idle=True, clock=clock).outcome == "ok"
    branch, _, _ = sim.add_branch(pid, "release-2025")
    sim.advance(20 * 60)
    # The listings (3 requests) and the project's page: no room for its names (2 more).
    assert run_sync(sim, tmp_path, skip_idle=True, clock=clock, max_requests=5).outcome == "budget"
    sim.advance(300)
    summary = run_sync(sim, tmp_path, skip_idle=True, clock=clock)
    assert (summary.outcome, summary.projects_idle) == ("ok", 0)
    import exporter

    con = exporter.connect(tmp_path)
    try:
        rows = con.execute(
            "SELECT DISTINCT branch_name FROM operations WHERE branch_id = ?", [branch]
        ).fetchall()
    finally:
        con.close()
    assert rows == [("release-2025",)]


def test_a_project_left_idle_is_current_as_of_the_listing_that_showed_it(
    make_sim: Any, tmp_path: Path
) -> None:
    """`check`, `status`, the metrics and the report judged a project `--skip-idle` left by its
    last walk: with `--max-age` shorter than `--full-sweep-every`, `check` said
    `project_not_synced` (and, after budgeted runs, `stale_sync`) for projects that were
    current. They judge it by the listing that showed it idle (`current_at`)."""
    sim = make_sim(
        seed=62,
        projects=3,
        shared_projects=0,
        orgs=1,
        days=0,
        ops_per_project_per_day=0,
        live_ops_per_project_per_hour=0,
    )
    quiet, small, large = sorted(sim.project_ids())
    for pid in (quiet, small, large):
        sim.add_operations(pid, 2, action="start_compute")
    sim.advance(3600)
    clock = sim_clock(sim)
    budgeted = {"page_size": 3, "skip_idle": True, "clock": clock}
    assert run_sync(sim, tmp_path, **budgeted).outcome == "ok"
    sim.advance(7200)
    sim.add_operations(small, 1, action="apply_config")
    sim.add_operations(large, 10, action="apply_config", same_second=False)
    sim.advance(600)
    assert run_sync(sim, tmp_path, max_requests=6, **budgeted).outcome == "budget"
    sim.advance(600)
    # The large project's walk completes; the run ends on its budget; the quiet one is idle.
    last = run_sync(sim, tmp_path, max_requests=8, **budgeted)
    assert (last.outcome, last.projects_idle, last.projects_ok) == ("budget", 1, 1)
    con = sqlite3.connect(tmp_path / "state.sqlite")
    try:
        [(started,)] = con.execute("SELECT max(started_us) FROM runs").fetchall()
        walks = dict(con.execute("SELECT id, last_synced_us FROM projects").fetchall())
    finally:
        con.close()
    assert walks[quiet] < started - 2 * 3600 * 10**6 and walks[small] == walks[large] == started
    since_walk = datetime.fromtimestamp(started / 1e6, timezone.utc)
    as_of = since_walk + timedelta(minutes=1)

    from exporter.analytics.report_figures import freshness
    from exporter.ops.check import run_check
    from exporter.ops.metrics import collect_metrics
    from exporter.ops.status import read_status

    check = run_check(tmp_path, max_age=timedelta(minutes=30), as_of=as_of)
    assert (check.findings, check.last_success_at) == ([], since_walk)
    later = run_check(tmp_path, max_age=timedelta(minutes=30), as_of=as_of + timedelta(hours=2))
    [message] = [f.message for f in later.findings if f.subject == quiet]
    walked = datetime.fromtimestamp(walks[quiet] / 1e6, timezone.utc)
    assert message == (
        f"project {quiet} last synced {walked:%Y-%m-%d %H:%M:%S}Z, last found idle "
        f"{since_walk:%Y-%m-%d %H:%M:%S}Z (2h 1m ago), longer ago than --max-age 30m"
    )
    status = read_status(tmp_path, as_of=as_of)
    assert [(p["id"], p["current_at"], p["lag_seconds"]) for p in status.projects] == [
        (pid, since_walk, 60) for pid in (quiet, small, large)
    ]
    assert status.projects[0]["last_synced_at"] == datetime.fromtimestamp(
        walks[quiet] / 1e6, timezone.utc
    )
    [success] = [
        m.samples
        for m in collect_metrics(tmp_path, as_of=as_of)
        if m.name == "opsaudit_last_success_timestamp_seconds"
    ]
    assert success == [({}, started / 1e6)]
    import exporter

    duck = exporter.connect(tmp_path)
    try:
        assert freshness(duck, as_of)["last_success_at"] == since_walk
    finally:
        duck.close()
