"""The commands that stream batches through Arrow (sync, demo) allocate with the system allocator,
in Arrow's C++ too (issue 24): mimalloc, Arrow's default, kept ~20 MiB of freed Parquet-writer
memory cached in its own reservation at 1M operations."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

# Runs the command line as `python -m exporter` does, then reports at exit how much memory
# Arrow ever took from mimalloc (pyarrow is loaded by then: both commands write Parquet).
_RUN = """
import atexit, sys
def report():
    pa = sys.modules["pyarrow"]
    print("mimalloc-max", pa.mimalloc_memory_pool().max_memory(), file=sys.stderr)
    print("system-max", pa.system_memory_pool().max_memory(), file=sys.stderr)
atexit.register(report)
sys.argv = ["opsaudit", *sys.argv[1:]]
from exporter.cli import main
main()
"""


def _peaks(stderr: str) -> dict[str, int]:
    peaks = {}
    for line in stderr.splitlines():
        name, _, value = line.partition(" ")
        if name in ("mimalloc-max", "system-max"):
            peaks[name] = int(value)
    return peaks


def _run(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {**env}
    env.pop("ARROW_DEFAULT_MEMORY_POOL", None)
    return subprocess.run(
        [sys.executable, "-c", _RUN, *args], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize("events", [False, True])
def test_sync_writes_parquet_without_mimalloc(make_sim: Any, tmp_path: Path, events: bool) -> None:
    """Also with an events option, whose callback imports pyarrow before the command's body."""
    sim = make_sim(seed=24, projects=2, shared_projects=0, days=3, ops_per_project_per_day=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSAUDIT_", "NEON_"))}
    env["NEON_API_KEY"] = sim.personal_key
    data_dir = tmp_path / "data"
    sink = ["--events-file", str(tmp_path / "events.jsonl")] if events else []
    done = _run(
        ["sync", "--data-dir", str(data_dir), "--base-url", sim.base_url, "--max-rps", "0", *sink],
        env,
    )
    assert done.returncode == 0, done.stderr
    assert list((data_dir / "operation_versions").rglob("*.parquet"))
    peaks = _peaks(done.stderr)
    assert peaks["mimalloc-max"] == 0
    assert peaks["system-max"] > 0


def test_demo_writes_parquet_without_mimalloc(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    done = _run(
        ["demo", "--data-dir", str(data_dir), "--projects", "2", "--days", "2"], dict(os.environ)
    )
    assert done.returncode == 0, done.stderr
    peaks = _peaks(done.stderr)
    assert peaks["mimalloc-max"] == 0
    assert peaks["system-max"] > 0
