"""Issue 19, findings 5 and 10: budgeted runs count as fresh once the trail holds every project
walked; a request budget that cannot cover the listing is refused, not spent for nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from exporter.core.errors import ConfigError, ExitCode
from exporter.engine.budget import Budget

from .conftest import assert_matches_truth, run_sync


def _sim(make_sim: Any, seed: int, projects: int) -> Any:
    return make_sim(
        seed=seed, projects=projects, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=5
    )


def _outcomes(data_dir: Path) -> list[tuple[str, str | None]]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return con.execute("SELECT outcome, error FROM runs ORDER BY started_us").fetchall()
    finally:
        con.close()


def test_a_request_budget_below_the_listing_is_refused(make_sim: Any, tmp_path: Path) -> None:
    """Finding 10: listing 3 projects costs 3 requests (organizations, projects, shared); a
    budget of 3 would walk nothing on every run and exit 0. It is a usage error that names the
    least budget that completes the trail."""
    sim = _sim(make_sim, 1910, projects=3)
    with pytest.raises(ConfigError) as err:
        run_sync(sim, tmp_path, max_requests=3)
    assert err.value.exit_code == ExitCode.USAGE
    assert str(err.value) == (
        "--max-requests 3 does not cover listing the projects (3 requests) and then a project's "
        "branches and endpoints (2): the trail would never be complete; use --max-requests 5 or "
        "more (more: faster coverage)"
    )
    assert sim.stats()["by_route"].get("GET /projects/{project_id}/operations", 0) == 0
    [(outcome, error)] = _outcomes(tmp_path)
    assert outcome == "failed" and error is not None and error.startswith("--max-requests 3 ")


def test_a_request_budget_of_the_listing_and_one_page_is_refused(
    make_sim: Any, tmp_path: Path
) -> None:
    """The listing and one request more walked a page per run but never a project's names:
    they take two requests at once, so every run exited 0 `budget`, no project ever complete,
    no branch named (a new user's first hour, thirteenth review)."""
    sim = _sim(make_sim, 1912, projects=3)
    with pytest.raises(ConfigError) as err:
        run_sync(sim, tmp_path, max_requests=4)
    assert err.value.exit_code == ExitCode.USAGE
    assert str(err.value).startswith("--max-requests 4 does not cover listing the projects (3 ")
    assert str(err.value).endswith("use --max-requests 5 or more (more: faster coverage)")


def test_a_reservation_is_taken_whole_and_gives_back_what_was_not_sent() -> None:
    """`Budget.reserve`: a project's two names listings take their requests at once, so the
    other walks' pages cannot take the second one's; what is not sent goes back."""
    budget = Budget(requests=3)
    held = budget.reserve(2)
    assert held is not None and budget.requests_left == 1
    assert budget.reserve(2) is None and budget.fell_short  # left whole for a later run
    assert budget.take()  # another walk's page: the last unreserved request
    assert not budget.take() and budget.reached
    assert held.take() and held.take()  # both listings are sent after all
    assert not held.take()
    assert budget.requests_left == 0
    # The first listing failed (or the run stopped): the second's request is given back.
    budget = Budget(requests=2)
    held = budget.reserve(2)
    assert held is not None and held.take()
    held.release()
    assert budget.requests_left == 1 and budget.take() and not budget.take()
    # Ctrl-C (the run's stop) and a passed deadline send no reserved request either.
    stop = threading.Event()
    now = [0.0]
    budget = Budget(seconds=10, requests=4, clock=lambda: now[0], stop=stop)
    held = budget.reserve(2)
    assert held is not None
    stop.set()
    assert not held.take()
    stop.clear()
    now[0] = 10.0
    assert not held.take() and budget.reached  # the run did not cover everything


def test_only_a_wait_that_passes_the_deadline_is_reported_given_up() -> None:
    """A retry's wait given up because it would end past --time-budget is what the summary
    names; once the deadline has passed, any wait is refused (a 0.01 s backoff said "gave up a
    retry's wait of 0.0s" of a run that had merely spent its time)."""
    now = [0.0]
    budget = Budget(seconds=10, clock=lambda: now[0])
    assert not budget.outlasted_by(9.0) and budget.wait_given_up == 0.0
    assert budget.outlasted_by(60.0) and budget.wait_given_up == 60.0 and budget.reached
    late = Budget(seconds=10, clock=lambda: now[0])
    now[0] = 10.5
    assert late.outlasted_by(0.01) and late.wait_given_up == 0.0 and late.reached


def test_walks_claim_a_bounded_budget_in_the_order_they_were_started(
    make_sim: Any, tmp_path: Path
) -> None:
    """The run starts its walks stalest first; under --max-requests their first claims on the
    budget keep that order (`walk.Turn`). A walk started later but quicker took the last
    requests before the stalest project's names (two at once) could, run after run."""
    from exporter.api.client import ApiClient
    from exporter.engine.walk import ProjectWalk, turns
    from exporter.store.state import ProjectCheckpoint

    sim = _sim(make_sim, 1914, projects=2)
    stalest, other = sim.project_ids()
    client = ApiClient(sim.base_url, sim.personal_key)
    budget = Budget(requests=2)
    first, second = turns(2)
    chunks: list[Any] = []
    # The stalest was walked before, its names never read: they come first, two at once.
    walked = ProjectCheckpoint(stalest, checkpoint_us=int(sim.world.clock_us))
    walks = [
        ProjectWalk(client, walked, chunks.append, budget=budget, turn=first),
        ProjectWalk(client, ProjectCheckpoint(other), chunks.append, budget=budget, turn=second),
    ]
    stopped: list[str] = []

    def run(walk: ProjectWalk) -> None:
        try:
            walk.run()
        except InterruptedError:
            stopped.append(walk.pid)

    later = threading.Thread(target=run, args=(walks[1],))
    try:
        later.start()  # the second walk is under way first ...
        time.sleep(0.3)
        run(walks[0])  # ... and the stalest still claims before it
        later.join(30)
    finally:
        client.close()
    assert [c.project_id for c in chunks if c.names is not None] == [stalest]
    assert not walks[0].result.names_left
    assert sorted(stopped) == sorted([stalest, other])  # neither had a request for a page
    assert (
        budget.requests_left == 0
        and sim.stats()["by_route"].get("GET /projects/{project_id}/operations", 0) == 0
    )


def test_the_least_request_budget_completes_the_trail_with_concurrent_walks(
    make_sim: Any, tmp_path: Path
) -> None:
    """The least budget the refusal names, four walks at once: each run spends at most its
    budget, and consecutive runs read every project's names and walk every project. The two
    listings are reserved together: when only checked, the other walks' pages took the second
    one's request, and the first was spent for nothing, run after run."""
    sim = _sim(make_sim, 1913, projects=3)
    spent = []
    for _ in range(14):  # 3 pages and 3 x 2 listings at 2 requests a run: 5 runs at least
        summary = run_sync(sim, tmp_path, max_requests=5, concurrency=4)
        spent.append(summary.requests)
        assert (summary.outcome, summary.exit_code) == ("budget", 0)
        if None not in _names_read(tmp_path) and None not in _last_walks(tmp_path):
            break
    assert max(spent) <= 5, spent
    assert None not in _names_read(tmp_path) and None not in _last_walks(tmp_path)
    assert_matches_truth(sim, tmp_path)


def test_the_cli_exits_2_for_a_budget_below_the_listing(make_sim: Any, tmp_path: Path) -> None:
    sim = _sim(make_sim, 1911, projects=2)
    env = {**os.environ, "NEON_API_KEY": sim.personal_key}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--data-dir",
            str(tmp_path / "d"),
            "--base-url",
            sim.base_url,
            "--max-rps",
            "0",
            "--max-requests",
            "4",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "Error: --max-requests 4 does not cover listing the projects (3 requests) and then a "
        "project's branches and endpoints (2): the trail would never be complete; use "
        "--max-requests 5 or more (more: faster coverage)"
    )


@pytest.mark.parametrize("budget", ["0", "0s", "0m"])
def test_a_time_budget_of_no_time_is_refused(tmp_path: Path, budget: str) -> None:
    """`--time-budget 0s` was taken: every run synced nothing and exited 0 `budget` (`0` was
    refused as no duration). Refused before anything is read or written."""
    from click.testing import CliRunner

    from exporter.cli import cli

    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(tmp_path / "d"), "--time-budget", budget],
        env={"NEON_API_KEY": "k" * 64},
    )
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--time-budget' (env var: 'OPSAUDIT_TIME_BUDGET'): "
        f"'{budget}' is no time at all: give a duration above 0 (90s, 2h)"
    )
    assert not (tmp_path / "d").exists()


def _last_walks(data_dir: Path) -> list[int]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        rows = con.execute("SELECT last_synced_us FROM projects WHERE deleted_us IS NULL")
        return [r[0] for r in rows.fetchall()]
    finally:
        con.close()


def test_budgeted_runs_count_as_fresh_once_every_project_is_walked(
    make_sim: Any, tmp_path: Path
) -> None:
    """Finding 5: consecutive budgeted runs (outcome budget, exit 0) walk the projects in turn;
    once every project has a completed walk, `check` finds the trail current (no stale_sync)
    and the last-success metric is the oldest project's last walk."""
    from datetime import datetime, timedelta, timezone

    from exporter.analytics.report import REPORT_SQL
    from exporter.analytics.report_figures import freshness
    from exporter.analytics.views import connect
    from exporter.ops.check import run_check
    from exporter.ops.metrics import collect_metrics

    sim = _sim(make_sim, 1905, projects=4)
    # The listing (3) and two walk pages: two walks whose names (two listings each) are left
    # for later, so no project is done and every one is left.
    first = run_sync(sim, tmp_path, max_requests=5)
    assert (first.outcome, first.projects_ok, first.projects_left) == ("budget", 0, 4)
    report = run_check(tmp_path)
    stale = [f.message for f in report.findings if f.check == "stale_sync"]
    assert stale == ["no sync has succeeded yet (see `opsaudit status`)"]
    assert report.last_success_at is None
    second = run_sync(sim, tmp_path, max_requests=5)
    assert (second.outcome, second.projects_ok, second.projects_left) == ("budget", 0, 4)
    walks = _last_walks(tmp_path)
    assert len(walks) == 4 and None not in walks
    report = run_check(tmp_path)
    assert [f for f in report.findings if f.check in ("stale_sync", "project_not_synced")] == []
    oldest = datetime.fromtimestamp(min(walks) / 1e6, timezone.utc)
    assert report.last_success_at == oldest
    # The report's headline says the same ("no successful sync yet" before).
    con = connect(tmp_path, only=REPORT_SQL)
    try:
        assert freshness(con, datetime.now(timezone.utc))["last_success_at"] == oldest
    finally:
        con.close()
    metrics = {m.name: m for m in collect_metrics(tmp_path)}
    [(_, success)] = metrics["opsaudit_last_success_timestamp_seconds"].samples
    assert success == min(walks) / 1e6
    outcome = dict(
        (labels["outcome"], v) for labels, v in metrics["opsaudit_last_run_outcome"].samples
    )
    assert outcome["budget"] == 1.0 and sum(outcome.values()) == 1.0
    # A budgeted run synced: half a year without another is a retention gap.
    later = run_check(tmp_path, as_of=datetime.now(timezone.utc) + timedelta(days=190))
    gaps = [f.message for f in later.findings if f.check == "retention_gap"]
    assert len(gaps) == 1 and gaps[0].startswith("the last run that synced finished ")
    assert_matches_truth(sim, tmp_path)


def test_a_failed_or_partial_run_after_budgeted_runs_keeps_the_trail_current(
    make_sim: Any, tmp_path: Path
) -> None:
    """Budgeted runs had made the trail current (`ok: last successful sync 1m ago`); one run
    that failed (the API down for a run), ended partial (one project's 500s) or was scoped to
    one project (`sync --project X`, exit 0) after them made `check` say `stale_sync: no sync has succeeded yet` at once and took
    `opsaudit_last_success_timestamp_seconds` away (the README's `absent()` alert fired): the
    trail stays current as of the oldest project's last walk, capped at the last budgeted run's
    end, and the failure is `last_run_failed`'s to report."""
    from datetime import datetime, timezone

    from exporter.ops.check import run_check
    from exporter.ops.metrics import collect_metrics

    sim = _sim(make_sim, 1905, projects=4)
    for _ in range(2):
        assert run_sync(sim, tmp_path, max_requests=5).outcome == "budget"
    walks = _last_walks(tmp_path)
    assert len(walks) == 4 and None not in walks
    oldest = datetime.fromtimestamp(min(walks) / 1e6, timezone.utc)
    assert run_check(tmp_path).last_success_at == oldest
    sim.fail_requests("/users/me/organizations", 503)
    # Not under --max-requests 5: its retries of the listing would end the run `budget`.
    assert run_sync(sim, tmp_path).outcome == "failed"
    sim.clear_failures()
    failing = sim.project_ids()[0]
    sim.fail_requests(f"/projects/{failing}/operations", 500)
    assert run_sync(sim, tmp_path).outcome == "partial"
    # The failing project's last walk (from a budgeted run) is now the oldest.
    now_walks = _last_walks(tmp_path)
    assert min(now_walks) in walks and now_walks.count(min(now_walks)) == 1
    oldest = datetime.fromtimestamp(min(now_walks) / 1e6, timezone.utc)
    for _ in ("after the partial run", "after the failed one"):
        report = run_check(tmp_path)
        assert report.last_success_at == oldest
        assert [f.check for f in report.findings if f.check != "project_error"] == [
            "last_run_failed"
        ]
        metrics = {m.name: m for m in collect_metrics(tmp_path)}
        [(_, success)] = metrics["opsaudit_last_success_timestamp_seconds"].samples
        assert success == min(now_walks) / 1e6
        # The same without the partial run: the failed one last.
        con = sqlite3.connect(tmp_path / "state.sqlite")
        with con:
            con.execute("DELETE FROM runs WHERE outcome = 'partial'")
        con.close()
    # A partial run whose walks all completed after a listing failed (the shared projects'):
    # the trail is current as of the last budgeted run's end, not of those walks.
    sim.clear_failures()
    sim.fail_requests("/projects/shared", 500)
    assert run_sync(sim, tmp_path).outcome == "partial"
    con = sqlite3.connect(tmp_path / "state.sqlite")
    [(budget_end,)] = con.execute(
        "SELECT max(finished_us) FROM runs WHERE outcome = 'budget'"
    ).fetchall()
    con.close()
    assert min(_last_walks(tmp_path)) > budget_end
    ended = datetime.fromtimestamp(budget_end / 1e6, timezone.utc)
    assert run_check(tmp_path).last_success_at == ended
    # A run scoped to one project (exit 0, the others not walked since it started) takes
    # nothing away either.
    sim.clear_failures()
    assert run_sync(sim, tmp_path, project_ids=[failing]).outcome == "ok"
    report = run_check(tmp_path)
    assert (report.last_success_at, report.findings) == (ended, [])


def test_a_run_says_which_projects_it_left_were_walked_and_only_wait_for_their_names(
    make_sim: Any, tmp_path: Path
) -> None:
    """A first run whose budget covered two projects' operations but not their names said
    '0/4 projects ...; 4 project(s) left for the next run' alone (left, README: never ok), while
    `status` showed those two walked: the line says how many of those left were walked, only
    their names to read."""
    sim = _sim(make_sim, 1905, projects=4)
    # The listing (3) and two walk pages: two walks complete, their names left.
    first = run_sync(sim, tmp_path, max_requests=5)
    assert first.line().split("; ", 1)[1] == (
        "4 project(s) left for the next run (2 of them walked, only their branches and "
        "endpoints to list)"
    )
    assert (first.projects_ok, first.projects_left, first.projects_names_left) == (0, 4, 2)
    assert len([w for w in _last_walks(tmp_path) if w is not None]) == 2


def test_names_left_by_runs_cut_short_are_read_first_and_finish_under_a_short_time_budget(
    make_sim: Any, tmp_path: Path
) -> None:
    """Walks complete, their names left (a budget too short for them): each later run reads
    the names of such a project before its page, while it has time. After the page, a
    --time-budget that fits a page and one listing per walker cut them in every run, for ever
    (a new user's first hour: every run exit 0, most operations without names)."""
    sim = _sim(make_sim, 1907, projects=4)
    # The listing and the four pages: every walk completes, the names of most are left.
    first = run_sync(sim, tmp_path, max_requests=7)
    assert first.outcome == "budget"
    assert None in _names_read(tmp_path)
    # About eleven requests a run (5 a second and the pacer's burst): the listing, a page and
    # one listing per walker: before, the four branches listings of every run were dropped.
    for _ in range(12):  # two or three runs on a quiet box; a busy one fits fewer requests
        sim.advance(60)
        run_sync(sim, tmp_path, max_rps=5, concurrency=4, time_budget=1.3)
        if None not in _names_read(tmp_path):
            break
    assert None not in _names_read(tmp_path)
    assert_matches_truth(sim, tmp_path)


def _names_read(data_dir: Path) -> list[int | None]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return [r[0] for r in con.execute("SELECT names_read_us FROM projects ORDER BY id")]
    finally:
        con.close()


def test_a_retry_never_waits_past_the_time_budget(make_sim: Any, tmp_path: Path) -> None:
    """A request failing again and again was retried with the whole retry policy (up to 8
    attempts, backoff to 30 s, Retry-After as sent) whatever the --time-budget said: a 5 s
    budget took 61 s, a cron job overran into its next start. A retry whose wait would pass
    the deadline gives the request up, as a spent budget: committed what was read, the
    outcome `budget` (exit 0), the project left for the next run."""
    from exporter.api.client import RetryPolicy

    sim = _sim(make_sim, 1915, projects=1)
    [pid] = sim.project_ids()
    sim.fail_requests(f"/projects/{pid}/operations", 503)  # every one, until cleared
    slow = RetryPolicy(max_attempts=12, backoff_initial=2.0, backoff_max=4.0)
    summary = run_sync(sim, tmp_path, retry=slow, time_budget=3.0)
    assert (summary.outcome, summary.exit_code) == ("budget", 0), summary.errors
    assert (summary.projects_ok, summary.projects_left, summary.errors) == (0, 1, {})
    # The first attempt and those whose backoff (1-2 s, then 2-4 s) ended within the 3 s.
    attempts = sim.stats()["by_route"]["GET /projects/{project_id}/operations"]
    assert 1 <= attempts <= 2, attempts
    sim.clear_failures()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


def test_a_run_ended_by_a_retry_after_past_its_budget_says_so(
    make_sim: Any, tmp_path: Path
) -> None:
    """A 429 asking for a minute under a 30 s --time-budget ends the run at once (outcome
    `budget`, exit 0): it said only "budget ... in 0.1s", every run while the throttling
    lasted, with nothing to tell it from a budget spent walking."""
    sim = _sim(make_sim, 1920, projects=1)
    [pid] = sim.project_ids()
    sim.fail_requests(f"/projects/{pid}/operations", 429, retry_after=60)
    summary = run_sync(sim, tmp_path, time_budget=30.0)
    assert (summary.outcome, summary.exit_code, summary.projects_left) == ("budget", 0, 1)
    assert summary.wait_given_up == 60.0
    assert summary.line().endswith(
        "; 1 project(s) left for the next run; gave up a retry's wait of 60.0s (Retry-After or"
        " backoff) that would end past --time-budget"
    )
    sim.clear_failures()
    again = run_sync(sim, tmp_path)
    assert (again.outcome, again.wait_given_up) == ("ok", 0.0)
    assert "gave up" not in again.line()
    assert_matches_truth(sim, tmp_path)


def test_a_time_budget_ending_in_the_listing_is_a_budget_outcome(
    make_sim: Any, tmp_path: Path
) -> None:
    """The listing's retries gave up at the budget's end: the run said `interrupted while
    listing` and exited 5, "a bug" (no signal came). It is the budget's outcome (exit 0)."""
    from exporter.api.client import RetryPolicy

    sim = _sim(make_sim, 1918, projects=2)
    sim.fail_requests("/projects", 503)
    slow = RetryPolicy(max_attempts=12, backoff_initial=2.0, backoff_max=4.0)
    summary = run_sync(sim, tmp_path, retry=slow, time_budget=3.0)
    assert (summary.outcome, summary.exit_code, summary.error) == (
        "budget",
        0,
        "the time budget ended while listing the projects",
    )
    sim.clear_failures()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


def test_the_listings_retries_do_not_count_against_the_least_request_budget(
    make_sim: Any, tmp_path: Path
) -> None:
    """A retried page of the listing is one request of it: counted twice, the least budget
    the refusal names was refused after one 503 (naming another). The retry is still sent
    within the budget: 4 for the listing, one page, the names left for a later run."""
    sim = _sim(make_sim, 1919, projects=3)
    sim.fail_requests("/projects/shared", 503, times=1)
    summary = run_sync(sim, tmp_path, max_requests=5)
    assert (summary.outcome, summary.exit_code) == ("budget", 0)
    assert (sim.stats()["requests"], summary.requests, summary.retries) == (5, 5, 1)


def test_a_retry_of_the_listing_the_request_budget_no_longer_covers_ends_the_run_budget(
    make_sim: Any, tmp_path: Path
) -> None:
    """The listing's retries count too: the shared projects' listing answering 503 was retried
    12 times under --max-requests 5 (14 requests). The run ends as a --time-budget ending in the
    listing does (outcome `budget`, exit 0), having sent 5, and says why."""
    sim = _sim(make_sim, 2403, projects=2)
    sim.fail_requests("/projects/shared", 503)
    summary = run_sync(sim, tmp_path, max_requests=5)
    assert (sim.stats()["requests"], summary.requests, _recorded_requests(tmp_path)) == (5, 5, [5])
    assert (summary.outcome, summary.exit_code, summary.error) == (
        "budget",
        0,
        "--max-requests 5 ran out retrying the projects listing",
    )
    assert summary.line().endswith("; gave up 1 retry(ies) that --max-requests no longer covered")
    sim.clear_failures()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


@pytest.mark.parametrize("budget", ["1", "2"])
def test_a_request_budget_no_run_could_work_with_is_refused_before_any_request(
    make_sim: Any, tmp_path: Path, budget: str
) -> None:
    """One page of the listing and a project's two names listings are the least any run needs:
    a budget below was refused only after the listing, recording a failed run."""
    from click.testing import CliRunner

    from exporter.cli import cli

    sim = _sim(make_sim, 1913, projects=1)
    data = tmp_path / "data"
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(data), "--base-url", sim.base_url, "--max-requests", budget],
        env={"NEON_API_KEY": sim.personal_key},
    )
    assert (result.exit_code, result.stdout) == (2, "")
    assert (
        f"Invalid value for '--max-requests' (env var: 'OPSAUDIT_MAX_REQUESTS'): {budget} does "
        "not cover a page of the projects "
        "listing and a project's branches and endpoints listings: 3 or more"
    ) in result.stderr
    assert sim.stats()["requests"] == 0 and not data.exists()


def _recorded_requests(data_dir: Path) -> list[int]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return [r[0] for r in con.execute("SELECT requests FROM runs ORDER BY started_us")]
    finally:
        con.close()


def test_a_request_budget_counts_every_retry(make_sim: Any, tmp_path: Path) -> None:
    """Retries did not count against --max-requests: with every operations page answering 500,
    `--max-requests 12` sent 68 requests (5.7x, on the account's shared 700/min). Every attempt
    counts: the server sees 12, the run records 12; the retry the budget no longer covers is
    given up as a spent budget's (outcome `budget`, exit 0, no project failed), and says so."""
    sim = _sim(make_sim, 2401, projects=3)
    sim.fail_requests("/operations", 500)  # every project's pages, until cleared
    summary = run_sync(sim, tmp_path, max_requests=12, concurrency=2)
    assert sim.stats()["requests"] == 12
    assert (summary.requests, _recorded_requests(tmp_path)) == (12, [12])
    assert (summary.outcome, summary.exit_code) == ("budget", 0), summary.errors
    assert (summary.projects_ok, summary.projects_failed, summary.projects_left) == (0, 0, 3)
    # The listing's 3, the first two walks' first pages and 7 retries; each of those walks'
    # next retry given up; the third walk's first page is refused (the budget is spent).
    assert (summary.errors, summary.retries, summary.retries_given_up) == ({}, 7, 2)
    assert summary.line().endswith(
        "; 3 project(s) left for the next run; gave up 2 retry(ies) that --max-requests no "
        "longer covered"
    )
    sim.clear_failures()
    again = run_sync(sim, tmp_path)
    assert (again.outcome, again.retries_given_up) == ("ok", 0)
    assert "gave up" not in again.line()
    assert_matches_truth(sim, tmp_path)


def test_a_walk_cut_by_a_retry_the_request_budget_refused_resumes_from_its_cursor(
    make_sim: Any, tmp_path: Path
) -> None:
    """The pages read before the refused retry are committed, the walk resumes from its cursor
    in the next run: no page is read twice, nothing is lost."""
    sim = make_sim(
        seed=2402, projects=1, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=12
    )
    [pid] = sim.project_ids()  # 5 operations: 3 pages of 2
    sim.fail_requests(f"/projects/{pid}/operations", 503, after=2)  # the third page on
    summary = run_sync(sim, tmp_path, max_requests=9, page_size=2)
    # listing 3, page 1, names 2, page 2, the third page and one retry: 19 before, exit 1
    assert (sim.stats()["requests"], summary.requests) == (9, 9)
    assert (summary.outcome, summary.projects_failed, summary.projects_left) == ("budget", 0, 1)
    assert summary.new_operations == 4
    sim.clear_failures()
    sim.reset_stats()
    again = run_sync(sim, tmp_path, page_size=2)
    assert again.outcome == "ok" and again.new_operations == 1
    # listing 3 and the rest of the walk from its cursor (page 3, then the new top: 1 page)
    assert sim.stats()["by_route"]["GET /projects/{project_id}/operations"] == 2
    assert_matches_truth(sim, tmp_path)
