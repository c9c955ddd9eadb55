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


# glibc's count of chunks served by mmap (mallinfo2: glibc 2.33 and later) after one freed 1 MiB
# block (glibc's dynamic threshold then rises above it) among 40 more held: 0 when they are
# on the heap, 40 when the threshold was fixed below 1 MiB (mallopt M_MMAP_THRESHOLD, for good).
_PROBE = """
import ctypes
class _Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]
_libc = ctypes.CDLL("libc.so.6")
_libc.mallinfo2.restype = _Info
def mapped_of_40():
    block = bytearray(1 << 20)
    del block
    before = _libc.mallinfo2().hblks
    held = [bytearray(1 << 20) for _ in range(40)]
    return _libc.mallinfo2().hblks - before
"""

# A library sync (a notebook's), then what the process's allocator does with 1 MiB blocks.
_LIBRARY_SYNC = (
    _PROBE
    + """
import sys
from pathlib import Path
import exporter
print("before", mapped_of_40())
summary = exporter.sync(
    exporter.SyncConfig(data_dir=Path(sys.argv[1]), api_key=sys.argv[3], base_url=sys.argv[2],
                        max_rps=None)
)
assert summary.outcome == "ok" and summary.versions_written, summary.line()
print("after", mapped_of_40())
"""
)

# The command line's sync, then the same probe (at exit: main() exits).
_CLI_SYNC = (
    _PROBE
    + """
import atexit, sys
atexit.register(lambda: print("after", mapped_of_40()))
sys.argv = ["opsaudit", *sys.argv[1:]]
from exporter.cli import main
main()
"""
)


def _glibc_with_mallinfo2() -> bool:
    import ctypes

    try:
        return hasattr(ctypes.CDLL("libc.so.6"), "mallinfo2")
    except OSError:
        return False


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="glibc 2.33+ (mallinfo2) only")
def test_a_library_sync_leaves_the_process_allocator_as_it_was(
    make_sim: Any, tmp_path: Path
) -> None:
    """Its compaction fixed glibc's mmap threshold at 256 KiB for the rest of the process (no
    call restores the dynamic one): a notebook's 1 MiB numpy arrays then each cost a mapping,
    ~12x slower. Only the command line's process, one run's alone, opts in."""
    sim = make_sim(seed=24, projects=2, shared_projects=0, days=2, ops_per_project_per_day=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSAUDIT_", "NEON_"))}
    done = subprocess.run(
        [sys.executable, "-c", _LIBRARY_SYNC, str(tmp_path / "d"), sim.base_url, sim.personal_key],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["before 0", "after 0"]


@pytest.mark.skipif(not _glibc_with_mallinfo2(), reason="glibc 2.33+ (mallinfo2) only")
def test_the_command_line_sync_maps_large_allocations(make_sim: Any, tmp_path: Path) -> None:
    """... and keeps the lower peak of compaction it bought (bench/README.md)."""
    sim = make_sim(seed=24, projects=2, shared_projects=0, days=2, ops_per_project_per_day=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSAUDIT_", "NEON_"))}
    env["NEON_API_KEY"] = sim.personal_key
    args = ["sync", "--data-dir", str(tmp_path / "d"), "--base-url", sim.base_url, "-q"]
    done = subprocess.run(
        [sys.executable, "-c", _CLI_SYNC, *args, "--max-rps", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["after 40"]
