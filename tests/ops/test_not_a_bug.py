"""What is no bug in opsaudit is not reported as one (exit 5): a data directory this user may not
read (every command says so, exit 6, nor "corrupt", whose advice to move the state away would
start a new dataset), Ctrl-C during a query (130).

The commands run as a child process without the capabilities that let root read any file
(`setpriv`), or as they are when the tests do not run as root."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .conftest import run_sync

ROOT = Path(__file__).resolve().parents[2]
DENIED = ": run as the user that owns it, or give this one access"


def _as_a_user(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m exporter ARGS` as a user that file modes apply to (root without the
    override capabilities)."""
    drop = "-dac_override,-dac_read_search"
    prefix = (
        ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"] if os.geteuid() == 0 else []
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NEON_API_KEY": "unused"}
    return subprocess.run(
        [*prefix, sys.executable, "-m", "exporter", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.fixture
def synced(make_sim: Any, tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "data"
    assert run_sync(make_sim(seed=5, projects=1), data).outcome == "ok"
    yield data
    data.chmod(0o755)  # (pytest removes it)
    (data / "state.sqlite").chmod(0o644)


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["check"],
        ["report"],
        ["query", "SELECT count(*) FROM operations"],
        ["compact"],
        ["discard-events", "--sink", "webhook"],
    ],
)
def test_an_unreadable_data_dir_is_said_so_by_every_command(
    synced: Path, command: list[str]
) -> None:
    synced.chmod(0)
    done = _as_a_user(*command, "--data-dir", str(synced))
    assert (done.returncode, done.stdout) == (6, "")
    assert done.stderr == f"Error: permission denied: {synced / 'state.sqlite'}{DENIED}\n"


def test_a_state_file_of_another_user_is_not_called_corrupt(synced: Path) -> None:
    (synced / "state.sqlite").chmod(0)
    done = _as_a_user("status", "--data-dir", str(synced))
    assert (done.returncode, done.stderr) == (
        6,
        f"Error: permission denied: {synced / 'state.sqlite'}{DENIED}\n",
    )


def test_doctor_finds_an_unreadable_data_dir(synced: Path) -> None:
    synced.chmod(0)
    done = _as_a_user("doctor", "--data-dir", str(synced), "--base-url", "http://127.0.0.1:9/")
    assert done.returncode == 8
    assert f"error data_dir: permission denied: {synced}{DENIED}" in done.stdout.splitlines()


def test_ctrl_c_during_a_query_is_an_interruption_not_a_bug(synced: Path) -> None:
    """DuckDB answers Ctrl-C with its own error ("Query interrupted"), not KeyboardInterrupt:
    it was reported as a bug in opsaudit, exit 5."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    slow = "SELECT sum(hash(range)) FROM range(100000000000)"
    query = subprocess.Popen(
        [sys.executable, "-m", "exporter", "query", "--data-dir", str(synced), slow],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Well into the scan: over 1.5 s of CPU (start-up is a few tenths), however busy the box.
        ticks = os.sysconf("SC_CLK_TCK")
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            fields = Path(f"/proc/{query.pid}/stat").read_text().rsplit(")", 1)[1].split()
            if (int(fields[11]) + int(fields[12])) / ticks > 1.5:
                break
            time.sleep(0.1)
        query.send_signal(signal.SIGINT)
        signalled = time.monotonic()
        out, err = query.communicate(timeout=20)
        stopped = time.monotonic() - signalled
    finally:
        query.kill()  # (a query left running would scan for minutes)
        query.wait()
    assert (query.returncode, out, err) == (130, "", "Interrupted.\n")
    assert stopped < 5, f"{stopped:.1f}s from Ctrl-C to the exit"
