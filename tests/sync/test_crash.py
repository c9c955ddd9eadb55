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


# A sync killed (SIGKILL) once its commits are made, at the start of its compaction.
_KILLED_AFTER_ITS_COMMITS = """
import os, signal, sys
from exporter.store.local.dataset import Dataset
Dataset.compact = lambda self, partitions: os.kill(os.getpid(), signal.SIGKILL)
from exporter.engine.sync import SyncConfig, sync
sync(SyncConfig(data_dir=sys.argv[1], api_key=sys.argv[2], base_url=sys.argv[3], max_rps=None))
"""


def test_a_killed_run_is_recorded_with_the_versions_its_commits_wrote(
    make_sim: Any, tmp_path: Path
) -> None:
    """The next run records a killed one as `killed`; its row in `sync_runs` said 0 versions
    written while `operation_versions` held every version it committed (thirteenth review)."""
    import exporter

    sim = make_sim(seed=56, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    data = tmp_path / "d"
    env = {**os.environ, "PYTHONPATH": str(Path(exporter.__file__).resolve().parents[1])}
    killed = subprocess.run(
        [
            sys.executable,
            "-c",
            _KILLED_AFTER_ITS_COMMITS,
            str(data),
            sim.personal_key,
            sim.base_url,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    requests = sim.stats()["requests"]  # the killed run's, every one answered
    assert run_sync(sim, data).outcome == "ok"
    con = exporter.connect(data)
    try:
        rows = con.execute(
            "SELECT r.outcome, r.versions_written, (SELECT count(*) FROM operation_versions v "
            "WHERE v.run_id = r.run_id) FROM sync_runs r ORDER BY r.started_at"
        ).fetchall()
        # What its commits did, as they did it: it said 0 new operations and 0 requests.
        figures = con.execute(
            "SELECT new_operations, changed_operations, requests FROM sync_runs "
            "ORDER BY started_at LIMIT 1"
        ).fetchall()
    finally:
        con.close()
    assert [(outcome, written) for outcome, written, _ in rows] == [
        ("killed", rows[0][2]),
        ("ok", 0),
    ]
    assert rows[0][2] == len(sim.ground_truth())
    assert figures == [(rows[0][2], 0, requests)]
