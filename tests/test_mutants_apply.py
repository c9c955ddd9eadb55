"""Every named mutant still applies: its snippet occurs exactly once in its file.

`scripts/mutants.py` reports a stale snippet only when it runs (the last step of CI); a change
that rewrites the code a mutant breaks must update the mutant in the same commit.
"""

from __future__ import annotations

import importlib.util
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mutants() -> list:
    spec = importlib.util.spec_from_file_location(
        "opsaudit_mutants", ROOT / "scripts" / "mutants.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building the class
    spec.loader.exec_module(module)
    return list(module.MUTANTS)


MUTANTS = _mutants()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_mutant_snippet_occurs_once(mutant) -> None:  # type: ignore[no-untyped-def]
    assert (ROOT / mutant.path).read_text().count(mutant.old) == 1, mutant.path


def test_mutant_names_are_unique() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))


_KILLED_RUN = """
import importlib.util, subprocess, sys, tempfile, time
from pathlib import Path
spec = importlib.util.spec_from_file_location("opsaudit_mutants", sys.argv[1])
m = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = m
spec.loader.exec_module(m)
work = Path(tempfile.mkdtemp(prefix="opsaudit-mutants-"))
(work / "a-mutant").mkdir()
with m._STARTING:  # as a mutant's tests are started
    test = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(120)"], stdout=subprocess.DEVNULL
    )
    m._RUNNING.add(test)
m._stop_on_sigterm(str(work))
print(work, test.pid, flush=True)
time.sleep(120)
"""


def test_a_run_killed_by_sigterm_leaves_no_copy_and_no_test_running() -> None:
    """CI runs the mutants beside its other steps and its EXIT trap SIGTERMs them when one of
    those fails: that ended the script alone; the tests it had started ran on for their whole
    length, and its copies of the repository stayed in /dev/shm (RAM) for good."""
    run = subprocess.Popen(
        [sys.executable, "-c", _KILLED_RUN, str(ROOT / "scripts" / "mutants.py")],
        stdout=subprocess.PIPE,
        text=True,
    )
    work = ""
    try:
        assert run.stdout is not None
        work, pid = run.stdout.readline().split()
        run.send_signal(signal.SIGTERM)
        assert run.wait(timeout=30) == 128 + signal.SIGTERM
        until = time.monotonic() + 10
        while Path(f"/proc/{pid}").exists() and time.monotonic() < until:
            time.sleep(0.05)
        assert (Path(f"/proc/{pid}").exists(), Path(work).exists()) == (False, False)
    finally:
        run.kill()
        run.communicate()
        if work:
            shutil.rmtree(work, ignore_errors=True)  # (left when the test fails)
