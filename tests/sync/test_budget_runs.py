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

from exporter._errors import ConfigError, ExitCode

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
    # The least it names works: one walk page per run, and the runs cover every project.
    for _ in range(3):
        summary = run_sync(sim, tmp_path, max_requests=4)
        assert (summary.outcome, summary.exit_code) == ("budget", 0)
        assert summary.projects_ok == 1
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
