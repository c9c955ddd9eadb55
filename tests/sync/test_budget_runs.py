"""Issue 19, findings 5 and 10: budgeted runs count as fresh once the trail holds every project
walked; a request budget that cannot cover the listing is refused, not spent for nothing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter.core.errors import ConfigError, ExitCode

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
    least budget that syncs anything."""
    sim = _sim(make_sim, 1910, projects=3)
    with pytest.raises(ConfigError) as err:
        run_sync(sim, tmp_path, max_requests=3)
    assert err.value.exit_code == ExitCode.USAGE
    assert str(err.value) == (
        "--max-requests 3 does not cover listing the projects (3 requests): nothing would ever "
        "be synced; use --max-requests 4 or more (more: faster coverage)"
    )
    assert sim.stats()["by_route"].get("GET /projects/{project_id}/operations", 0) == 0
    [(outcome, error)] = _outcomes(tmp_path)
    assert outcome == "failed" and error is not None and error.startswith("--max-requests 3 ")
    # The least it names walks the operations: one walk page per run, and the runs cover every
    # project. A project's first walk also wants its two names listings, which one unit cannot
    # cover: each run says so (that project is left, the outcome `budget`, exit 0).
    for _ in range(3):
        summary = run_sync(sim, tmp_path, max_requests=4)
        assert (summary.outcome, summary.exit_code) == ("budget", 0)
        assert (summary.projects_ok, summary.projects_left) == (0, 3)
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
            "2",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "Error: --max-requests 2 does not cover listing the projects (3 requests): nothing "
        "would ever be synced; use --max-requests 4 or more (more: faster coverage)"
    )


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
