"""Issue 19, finding 14: a mistyped `--project` is an error everywhere: the sync names it and
exits 1, `status` does not call it deleted, `check` flags a configured project never synced."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from .conftest import assert_matches_truth, run_sync

MESSAGE = (
    "project nope-123 not found (404), and no listing ever showed it: check the --project id "
    "(and that the key can read it)"
)


def _cli(sim: Any, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    return subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_mistyped_project_exits_1_named_and_check_flags_it(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=1914, projects=1, shared_projects=0, orgs=1, days=1)
    data = str(tmp_path / "d")
    done = _cli(sim, "sync", "--data-dir", data, "--max-rps", "0", "--project", "nope-123")
    assert done.returncode == 1, done.stderr
    assert done.stdout.startswith("sync partial: 0/1 projects")
    assert f"  nope-123: {MESSAGE}" in done.stderr.splitlines()
    status = _cli(sim, "status", "--data-dir", data, "--format", "json")
    assert status.returncode == 0, status.stderr
    [row] = json.loads(status.stdout)["projects"]
    assert (row["id"], row["deleted"], row["last_error"]) == ("nope-123", False, MESSAGE)
    check = _cli(sim, "check", "--data-dir", data)
    assert check.returncode == 8, check.stdout + check.stderr
    lines = check.stdout.splitlines()
    assert "project_not_synced: project nope-123 has never completed a sync" in lines
    assert f"project_error: project nope-123 failed its last sync: {MESSAGE}" in lines
    # A run of one organization does not list everything the key sees: the id stays flagged.
    done = _cli(sim, "sync", "--data-dir", data, "--max-rps", "0", "--org-id", sim.org_ids[0])
    assert done.returncode == 0, done.stderr
    assert _cli(sim, "check", "--data-dir", data).returncode == 8
    # A later run lists everything the key sees, without it: it is forgotten, not flagged for
    # ever (a mistyped id had no way out but a new data directory).
    done = _cli(sim, "sync", "--data-dir", data, "--max-rps", "0")
    assert done.returncode == 0, done.stderr
    assert "project nope-123 forgotten: no listing of what the key sees shows it" in done.stderr
    status = _cli(sim, "status", "--data-dir", data, "--format", "json")
    assert [row["id"] for row in json.loads(status.stdout)["projects"]] == sim.project_ids()
    check = _cli(sim, "check", "--data-dir", data)
    assert check.returncode == 0, check.stdout + check.stderr


def test_a_mistyped_project_beside_a_real_one_is_partial(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=1915, projects=1, shared_projects=0, orgs=1, days=1)
    [real] = sim.project_ids()
    summary = run_sync(sim, tmp_path, project_ids=[real, "nope-123"])
    assert (summary.outcome, summary.exit_code, summary.projects_ok) == ("partial", 1, 1)
    assert summary.errors == {"nope-123": MESSAGE}
    assert summary.projects_deleted == 0
    assert_matches_truth(sim, tmp_path, [real])


def test_a_listed_project_that_answers_404_is_still_deleted(make_sim: Any, tmp_path: Path) -> None:
    """A project a listing showed, then deleted: `--project` on it marks it deleted, no error."""
    sim = make_sim(seed=1916, projects=2, shared_projects=0, orgs=1, days=1)
    gone, _ = sorted(sim.project_ids())
    assert run_sync(sim, tmp_path).outcome == "ok"
    sim.delete_project(gone)
    summary = run_sync(sim, tmp_path, project_ids=[gone])
    assert (summary.outcome, summary.projects_deleted, summary.errors) == ("ok", 1, {})
