"""Backfill and incremental syncs against the simulator equal its ground truth exactly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from exporter.engine import sync as _sync

from .conftest import assert_matches_truth, assert_no_identical_versions, read_versions, run_sync


def test_backfill_of_many_projects_equals_ground_truth(
    make_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pages of 10 projects make the listing page even with a few dozen projects. Patched where
    # the run reads it (`_sync` imported the name: patching `_discovery` changed nothing).
    monkeypatch.setattr(_sync, "PROJECTS_PAGE", 10)
    sim = make_sim(seed=11, projects=28, days=2, ops_per_project_per_day=300)
    summary = run_sync(sim, tmp_path, page_size=100, concurrency=4)
    # The patch took effect: 2 organizations of 14 projects, 2 pages of 10 each (1 at 400).
    assert sim.stats()["by_route"]["GET /projects"] == 4
    assert summary.outcome == "ok", summary.errors
    assert summary.projects_total == len(sim.project_ids()) >= 28
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)
    assert summary.new_operations == len(sim.ground_truth())


def test_ties_at_page_boundaries_lose_and_duplicate_nothing(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=3, projects=1, days=1, ops_per_project_per_day=50)
    pid = sim.project_ids()[0]
    run_sync(sim, tmp_path, page_size=7)
    # New operations sharing one second with each other straddle several page boundaries.
    sim.advance(1)
    sim.add_operations(pid, 23, same_second=True)
    run_sync(sim, tmp_path, page_size=7)
    # More arrive in that very same second after the sync: they must still be picked up.
    sim.add_operations(pid, 5, same_second=True)
    run_sync(sim, tmp_path, page_size=7)
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def test_incremental_sync_records_every_observed_state(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=5, projects=2, days=1, ops_per_project_per_day=120)
    pid = sim.project_ids()[0]
    run_sync(sim, tmp_path)
    [op_id] = sim.add_operations(pid, 1, action="apply_config", status="running")
    history = [
        {"status": "failed", "failures_count": 1, "error": "compute unavailable"},
        {"status": "running", "failures_count": 1},
        {"status": "failed", "failures_count": 2, "error": "compute unavailable again"},
        {"status": "running", "failures_count": 2},
        {"status": "finished", "failures_count": 2},
    ]
    first = run_sync(sim, tmp_path)
    assert first.new_operations == 1
    for change in history:
        sim.advance(5)
        sim.update_operation(op_id, **change)
        summary = run_sync(sim, tmp_path)
        assert summary.changed_operations == 1, change
    quiet = run_sync(sim, tmp_path)
    assert quiet.new_operations == 0 and quiet.changed_operations == 0
    versions = [r for r in read_versions(tmp_path) if r["id"] == op_id]
    assert [r["status"] for r in versions] == [
        "running",
        "failed",
        "running",
        "failed",
        "running",
        "finished",
    ]
    assert [r["failures_count"] for r in versions] == [0, 1, 1, 2, 2, 2]
    assert [r["version"] for r in versions] == [1, 2, 3, 4, 5, 6]
    assert_matches_truth(sim, tmp_path)
    assert quiet.open_operations == sum(
        1
        for o in sim.ground_truth().values()
        if o["status"] not in ("finished", "cancelled", "skipped")
    )


def test_live_progress_then_quiet_sync_equals_ground_truth(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=8, projects=4, days=1, ops_per_project_per_day=400)
    run_sync(sim, tmp_path, page_size=50)
    for _ in range(4):
        sim.advance(120)  # new operations arrive, open ones progress or fail and retry
        run_sync(sim, tmp_path, page_size=50)
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def test_mutations_during_the_walk_then_one_quiet_sync(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=9, projects=6, days=2, ops_per_project_per_day=500)
    sim.start_live(tick_seconds=0.01, sim_seconds_per_tick=20.0)
    try:
        for _ in range(3):
            run_sync(sim, tmp_path, page_size=40, concurrency=3)
    finally:
        sim.stop_live()
    run_sync(sim, tmp_path, page_size=40)
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def test_no_change_incremental_costs_one_page_per_project(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=12, projects=5, days=1, ops_per_project_per_day=200)
    # Settle every operation so that no open operation needs a refresh.
    for op_id, op in sim.ground_truth().items():
        if op["status"] not in ("finished", "cancelled", "skipped"):
            sim.update_operation(op_id, status="finished")
    run_sync(sim, tmp_path)
    sim.reset_stats()
    summary = run_sync(sim, tmp_path)
    stats = sim.stats()
    ops_requests = stats["by_route"].get("GET /projects/{project_id}/operations", 0)
    assert ops_requests == len(sim.project_ids())
    assert summary.new_operations == 0


@pytest.mark.parametrize("past_end", ["empty_with_pagination", "empty_without_pagination"])
def test_both_shapes_of_a_page_past_the_end(make_sim: Any, tmp_path: Path, past_end: str) -> None:
    sim = make_sim(seed=13, projects=2, days=1, ops_per_project_per_day=40, past_end=past_end)
    pid = sim.project_ids()[0]
    # Make the project's count an exact multiple of the page size: the walk must then ask for
    # the page past the end and accept either shape of it.
    page = 10
    extra = (-len(sim.ground_truth([pid]))) % page
    if extra:
        sim.add_operations(pid, extra, same_second=False)
    summary = run_sync(sim, tmp_path, page_size=page)
    assert summary.outcome == "ok"
    assert_matches_truth(sim, tmp_path)
    sim.advance(5)
    sim.add_operations(pid, page, same_second=True)
    run_sync(sim, tmp_path, page_size=page)
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def _run_python(script: str, sim: Any, data_dir: Path) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh Python process set to sync `sim` into `data_dir`; it must succeed."""
    env = {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(data_dir),
    }
    done = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done


def test_a_sync_process_never_imports_pandas(make_sim: Any, tmp_path: Path) -> None:
    """pyarrow imports pandas (when installed, as here) on its first array of a Python list
    only to ask whether it is a pandas object: ~0.25 s of CPU and ~40 MiB a sync never uses
    (issue 24, `records.arrow_without_pandas`). Explicit use still works afterwards. numpy is
    loaded first, as in a notebook (otherwise the sync refuses numpy, and pandas with it)."""
    sim = make_sim(seed=24, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    script = (
        "import runpy, sys\n"
        "import numpy\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0']\n"
        "try:\n"
        "    runpy.run_module('exporter', run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        "print('pandas imported:', 'pandas' in sys.modules)\n"
        "import pyarrow as pa\n"
        "print('to_pandas rows:', len(pa.table({'a': [1, 2]}).to_pandas()))\n"
    )
    done = _run_python(script, sim, tmp_path / "d")
    assert done.stdout.splitlines()[-2:] == ["pandas imported: False", "to_pandas rows: 2"]
    assert_matches_truth(sim, tmp_path / "d")


def test_the_command_line_called_in_process_leaves_numpy_importable(
    make_sim: Any, tmp_path: Path
) -> None:
    """A notebook that runs the command line's sync in-process (`cli.main`, not the console
    script) keeps numpy: only a process opsaudit owns refuses it (it could never import numpy
    again, and pyarrow's conversions failed)."""
    sim = make_sim(seed=26, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    script = (
        "import sys\n"
        "from exporter.cli import cli\n"
        "try:\n"
        "    cli.main(['sync', '--max-rps', '0'], prog_name='opsaudit')\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        "import pyarrow as pa\n"
        "print('to_numpy:', pa.array([1, 2]).to_numpy().tolist())\n"
    )
    done = _run_python(script, sim, tmp_path / "d")
    assert done.stdout.splitlines()[-1] == "to_numpy: [1, 2]"
    assert_matches_truth(sim, tmp_path / "d")


def test_a_sync_process_runs_as_if_numpy_were_not_installed(make_sim: Any, tmp_path: Path) -> None:
    """numpy is no dependency, and pyarrow imports it when it can only to offer conversions a
    sync never asks for: ~0.1 s of CPU and ~10 MiB per run (issue 24,
    `cli._common.numpy_out_of_reach`). Refused for the whole process: a conversion asked for
    afterwards fails with pyarrow's ImportError, as where numpy is not installed."""
    sim = make_sim(seed=25, projects=2, shared_projects=0, days=2, ops_per_project_per_day=30)
    script = (
        "import runpy, sys\n"
        "sys.argv = ['opsaudit', 'sync', '--max-rps', '0']\n"
        "try:\n"
        "    runpy.run_module('exporter', run_name='__main__')\n"
        "except SystemExit as done:\n"
        "    assert done.code in (0, None), done.code\n"
        "print('numpy imported:', 'numpy' in sys.modules)\n"
        "import pyarrow as pa\n"
        "try:\n"
        "    pa.array([1, 2]).to_numpy()\n"
        "except ImportError:\n"
        "    print('to_numpy: ImportError')\n"
    )
    done = _run_python(script, sim, tmp_path / "d")
    assert done.stdout.splitlines()[-2:] == ["numpy imported: False", "to_numpy: ImportError"]
    assert_matches_truth(sim, tmp_path / "d")
