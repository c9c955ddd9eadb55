"""kill -9 at random instants, then a final sync: exactly the uninterrupted dataset."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests.killing import KillWindow

from .conftest import assert_matches_truth, assert_no_identical_versions, run_sync
from .test_flagged import derived_flagged, recorded_flagged


def _start_sync(sim: Any, data_dir: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(data_dir),
    }
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--max-rps",
            "0",
            "--concurrency",
            "3",
            "--wait",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_kill_9_at_random_instants(make_sim: Any, tmp_path: Path) -> None:
    from exporter.simulator import Faults

    sim = make_sim(seed=31, projects=6, days=5, ops_per_project_per_day=1500)
    # Slow responses stretch each run so that kills land mid-walk, mid-commit and mid-compaction.
    sim.faults = Faults(p_slow=0.3, slow_seconds=0.02, seed=4)
    rng = random.Random(1234)
    kills, when = 0, KillWindow(rng, 0.1, 2.0)
    for _ in range(60):  # bounded; stops after 12 kills (a run may finish before its kill)
        if kills >= 12:
            break
        proc = _start_sync(sim, tmp_path)
        time.sleep(when.delay())
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        when.killed(proc.returncode is None)
        proc.wait()
        sim.advance(rng.uniform(0, 90))  # the platform moves on between runs
    assert kills >= 10
    sim.faults = Faults()
    summary = run_sync(sim, tmp_path)
    assert summary.outcome == "ok"
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)
    # The flagged record holds exactly the committed versions' flagged rows: committed with them.
    assert recorded_flagged(tmp_path) == derived_flagged(tmp_path)
    # Nothing left in staging, and every file on disk is registered (no orphans).
    assert list((tmp_path / "_staging").iterdir()) == []
