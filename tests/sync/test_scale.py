"""Issue 12: large accounts — listing cost, budgets, staleness order, fairness, coverage."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from .conftest import assert_matches_truth, empty_sim, run_sync


def test_listing_uses_limit_400_and_falls_back_to_100_once_and_remembers(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(
        seed=130, projects=250, shared_projects=0, orgs=1, days=0, projects_max_limit=100
    )
    first = run_sync(sim, tmp_path)
    assert first.outcome == "ok" and first.projects_total == 250
    con = sqlite3.connect(tmp_path / "state.sqlite")
    assert con.execute("SELECT value FROM meta WHERE key = 'projects_page_limit'").fetchone() == (
        "100",
    )
    con.close()
    listing = sim.stats()["by_route"]["GET /projects"]
    # One refused request at 400, then 3 pages of 100 (250 projects: 100, 100, 50).
    assert listing == 4
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert sim.stats()["by_route"]["GET /projects"] == 3  # remembered: no refused request
    assert_matches_truth(sim, tmp_path)


def test_listing_of_a_400_limit_account_takes_ceil_p_plus_1_over_400(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=131, projects=800, shared_projects=0, orgs=1, days=0)
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert sim.stats()["by_route"]["GET /projects"] == 3  # ceil(801 / 400)


@pytest.mark.parametrize(("page", "projects", "pages"), [(100, 250, 3), (100, 200, 3)])
def test_a_listing_paged_below_its_limit_is_read_to_its_end(
    make_sim: Any, tmp_path: Path, page: int, projects: int, pages: int
) -> None:
    """A server paging at 100 (the guide's maximum) whatever `limit` asks: its short first page
    was taken for the last, 'sync ok: 100/100 projects', exit 0, the rest never synced, and
    after a complete listing marked deleted. A page of 100 with a cursor is followed; an empty
    or other-sized page ends the listing."""
    sim = make_sim(seed=132, projects=projects, shared_projects=0, orgs=1, days=0)
    assert run_sync(sim, tmp_path).projects_total == projects  # a complete listing first
    sim.reset_stats()
    sim.world.config = dataclasses.replace(sim.world.config, projects_page=page)
    summary = run_sync(sim, tmp_path)
    assert (summary.outcome, summary.projects_total) == ("ok", projects)
    assert sim.stats()["by_route"]["GET /projects"] == pages
    con = sqlite3.connect(tmp_path / "state.sqlite")
    assert con.execute("SELECT count(*) FROM projects WHERE deleted_us IS NULL").fetchone() == (
        projects,
    )
    con.close()


def test_an_organization_of_exactly_ten_projects_lists_in_one_request(
    make_sim: Any, tmp_path: Path
) -> None:
    """A page of 10 (the page a request without `limit` gets) was followed too: an organization
    of exactly 10 projects paid a second listing request in every run (14 requests for 13 in a
    no-change run). Every request sends `limit`, so a page of 10 is the last."""
    sim = make_sim(seed=133, projects=10, shared_projects=0, orgs=1, days=0)
    assert run_sync(sim, tmp_path).projects_total == 10
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert sim.stats()["by_route"]["GET /projects"] == 1


def _synced(data_dir: Path) -> dict[str, int | None]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return dict(con.execute("SELECT id, last_synced_us FROM projects").fetchall())
    finally:
        con.close()


def test_a_budgeted_run_stops_cleanly_and_the_next_ones_resume_exactly(
    make_sim: Any, tmp_path: Path
) -> None:
    """Walks cut by --max-requests commit what they read and resume from their cursor; every
    run exits 0 (outcome `budget` until the account is covered) and the end is ground truth."""
    sim = empty_sim(make_sim, 132, projects=6)
    for pid in sim.project_ids():
        sim.add_operations(pid, 40, same_second=False)
    outcomes = []
    pages = 0
    for _ in range(20):
        # One walk at a time: with several, a walk finished while others spend the last units
        # leaves only its names listings for the next run, and the run has no walk left.
        summary = run_sync(sim, tmp_path, page_size=5, max_requests=12, concurrency=1)
        assert summary.exit_code == 0, summary.errors
        outcomes.append(summary.outcome)
        pages += summary.pages
        if summary.outcome == "ok":
            break
        assert summary.projects_left > 0
    assert outcomes[-1] == "ok" and set(outcomes[:-1]) == {"budget"}, outcomes
    # 6 x 9 pages at least; a walk cut short walks again from the newest when it resumes
    # (one page each time), and every run reads one page of each project it finishes.
    assert 54 <= pages <= 54 + 2 * 4 * len(outcomes), (pages, outcomes)
    assert_matches_truth(sim, tmp_path)


def test_budgeted_runs_cover_every_project_stalest_first(make_sim: Any, tmp_path: Path) -> None:
    """12 one-page projects, 4 walks per run: three runs walk each project exactly once, and
    after new operations arrive, no project waits more than ceil(12 / 4) = 3 runs."""
    sim = make_sim(seed=133, projects=12, shared_projects=0, orgs=1, days=0)
    pids = sorted(sim.project_ids())
    listing = 3  # organizations, projects (one page of 400), shared projects
    walked: list[set[str]] = []
    before = _synced(tmp_path) if (tmp_path / "state.sqlite").exists() else {}
    first_walk = 3  # its page, then its branches and endpoints listings (names, issue 21)
    for _ in range(3):
        # One walk at a time: a walk started while another still lists its names would take
        # one of the last units and complete too.
        summary = run_sync(sim, tmp_path, max_requests=listing + 4 * first_walk, concurrency=1)
        after = _synced(tmp_path)
        walked.append({p for p in pids if after.get(p) != before.get(p)})
        before = after
    assert [len(w) for w in walked] == [4, 4, 4]
    assert set().union(*walked) == set(pids)
    assert summary.outcome == "budget" and summary.projects_left == 8
    sim.advance(60)
    for pid in pids:
        sim.add_operations(pid, 2)
    for _ in range(3):
        assert run_sync(sim, tmp_path, max_requests=listing + 4, concurrency=2).exit_code == 0
    assert_matches_truth(sim, tmp_path)


def test_coverage_figures_are_exact_on_a_constructed_state(tmp_path: Path) -> None:
    from exporter.store.state import StateDB

    hour, day = 3_600_000_000, 86_400_000_000
    now = 1_800_000_000_000_000
    state = StateDB(tmp_path / "state.sqlite")
    with state.transaction() as con:
        rows = [
            ("p-new", now - 10, None, None),  # never walked: lag since first seen
            ("p-fresh", now - 5 * day, now - hour // 2, None),
            ("p-hour", now - 5 * day, now - hour, None),  # exactly an hour: within
            ("p-day", now - 5 * day, now - 20 * hour, None),
            ("p-old", now - 5 * day, now - 3 * day, None),
            ("p-gone", now - 9 * day, now - 8 * day, now - 7 * day),  # deleted: not counted
        ]
        con.executemany(
            "INSERT INTO projects (id, first_seen_us, last_synced_us, current_us, deleted_us) "
            "VALUES (?1, ?2, ?3, ?3, ?4)",
            rows,
        )
        ops = [
            ("o1", "p-day", "failed", now - 2 * day),
            ("o2", "p-day", "running", now - hour),
            ("o3", "p-old", "error", now - day - 1),
            ("o4", "p-old", "finished", now - 3 * day),  # kept for one more look: not open
        ]
        con.executemany(
            "INSERT INTO open_ops (id, project_id, created_us, status, fingerprint, version, "
            "checked_us) VALUES (?, ?, 0, ?, x'00', 1, ?)",
            ops,
        )
    cov = state.coverage(now)
    state.close()
    assert (cov.projects, cov.within_hour, cov.within_day) == (5, 2, 3)
    assert cov.oldest_lag_us == 3 * day
    assert cov.open_unchecked_day == 2
    assert (cov.share_hour, cov.share_day) == (0.4, 0.6)


def test_skip_idle_defers_quiet_projects_and_keeps_the_full_sweep_guarantee(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--skip-idle` leaves projects whose listing shows no activity since their last walk;
    what it can delay is exactly the operations that leave no trace in the listing (here the
    control plane's check_availability); every project is walked within --full-sweep-every."""
    import time

    from .test_skip_idle import _quiet_sim

    # Their activity 20 minutes before the walks: older than a clock-skew margin, and finished
    # too long ago to be tracked for one more look.
    sim = _quiet_sim(make_sim, 134, projects=3)
    busy, quiet, _idle = sorted(sim.project_ids())
    assert run_sync(sim, tmp_path).outcome == "ok"
    sim.advance(1260)  # the simulated clock moves past the wall clock: activity after the walk
    new_busy = sim.add_operations(busy, 2, action="start_compute")
    new_quiet = sim.add_operations(quiet, 2, action="check_availability")
    sim.reset_stats()
    deferred = run_sync(sim, tmp_path, skip_idle=True, full_sweep_every=3600.0)
    assert deferred.outcome == "ok"
    assert (deferred.projects_idle, deferred.projects_ok) == (2, 1)
    assert sim.stats()["by_route"]["GET /projects/{project_id}/operations"] == 1
    from .conftest import latest_raw

    stored = latest_raw(tmp_path)
    assert set(new_busy) <= set(stored)
    assert not set(new_quiet) & set(stored)  # delayed: no trace in the listing
    time.sleep(1.2)
    swept = run_sync(sim, tmp_path, skip_idle=True, full_sweep_every=1.0)
    assert swept.projects_idle == 0 and swept.projects_ok == 3
    assert_matches_truth(sim, tmp_path)
