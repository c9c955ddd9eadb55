"""Issue 12: large accounts — listing cost, budgets, staleness order, fairness, coverage."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .conftest import assert_matches_truth, run_sync


def _listing_limits(sim: Any) -> list[str]:
    return [p for p in sim.request_log() if p.startswith("/api/v2/projects?")]


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
