"""Issue 19, finding 15: Ctrl-C (SIGINT) and SIGTERM stop a sync at once, as a spent budget
does: what was read is committed, the process exits within a couple of seconds (130 / 143) and
the run is recorded as `interrupted`; the next run continues and is exact."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from exporter.simulator import Faults

from .conftest import assert_matches_truth, run_sync

PROJECTS = 150
OPS_ROUTE = "GET /projects/{project_id}/operations"


def _walked(data_dir: Path, *, names: bool = False) -> int:
    """Projects with a completed walk of their operations (`names`: and their names listings
    read: only those are done, a walk the stop cut before its listings is left)."""
    read = " AND names_read_us IS NOT NULL" if names else ""
    try:
        con = sqlite3.connect(f"file:{data_dir / 'state.sqlite'}?mode=ro", uri=True, timeout=5)
        try:
            [(n,)] = con.execute(
                f"SELECT count(*) FROM projects WHERE last_synced_us IS NOT NULL{read}"
            ).fetchall()
            return int(n)
        finally:
            con.close()
    except sqlite3.Error:
        return 0  # not created yet


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_the_sync_within_seconds_and_commits_what_was_read(
    make_sim: Any, tmp_path: Path, signum: int, code: int
) -> None:
    sim = make_sim(
        seed=1915, projects=PROJECTS, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=20
    )
    # Every answer takes 0.1 s: the whole backfill takes 7.5 s at least (150 projects, 2 at once).
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.1)
    data = tmp_path / "d"
    env = {**os.environ, "NEON_API_KEY": sim.personal_key}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--data-dir",
            str(data),
            "--base-url",
            sim.base_url,
            "--max-rps",
            "0",
            "--concurrency",
            "2",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while (
            sim.stats()["by_route"].get(OPS_ROUTE, 0) < 10
            and time.monotonic() < deadline
            and proc.poll() is None
        ):
            time.sleep(0.05)
        assert proc.poll() is None, "the sync ended before it could be interrupted"
        proc.send_signal(signum)
        signalled = time.monotonic()
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == code, out + err
    assert elapsed < 2.5, f"{elapsed:.1f}s from the signal to the exit"
    assert f"{signal.Signals(signum).name}: stopping; committing what was read" in err
    assert out.startswith("sync interrupted: ")
    walked = _walked(data)
    assert 4 <= walked < PROJECTS
    con = sqlite3.connect(data / "state.sqlite")
    try:
        [(outcome, left)] = con.execute("SELECT outcome, projects_left FROM runs").fetchall()
    finally:
        con.close()
    assert outcome == "interrupted" and left == PROJECTS - _walked(data, names=True)
    sim.faults = Faults()
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)
