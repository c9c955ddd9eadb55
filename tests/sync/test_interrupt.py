"""Issue 19, finding 15: Ctrl-C (SIGINT) and SIGTERM stop a sync at once, as a spent budget
does: what was read is committed, the process exits within a couple of seconds (130 / 143) and
the run is recorded as `interrupted`; the next run continues and is exact."""

from __future__ import annotations

import contextlib
import json
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

# Seconds from a signal (or a library caller's stop) to the exit: a stop takes well under one on
# a quiet box; CI's runs the suite beside the mutants (a load of 8 and more on 2 cores). What the
# tests tell apart: a sync that stops at once and one that goes on with its backfill (20 s and
# more here), a trickling answer (for ever) or a slow receiver's backlog (19 s).
PROMPT = 5.0

# The start of a library script below: `on_the_way(fire)` calls `fire` (from a walk's thread)
# when the sync asks for its tenth page of operations: a timer started with the script fired
# before the run was recorded on a loaded machine (then nothing was recorded, and the test,
# which reads the record, failed).
_ON_THE_WAY = """
from exporter.api.client import ApiClient
_pages, _list_operations = [], ApiClient.list_operations
def on_the_way(fire):
    def list_operations(self, *args, **kwargs):
        _pages.append(1)
        if len(_pages) == 10:
            fire()
        return _list_operations(self, *args, **kwargs)
    ApiClient.list_operations = list_operations
"""
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


def _sync_process(sim: Any, data: Path, *extra: str) -> subprocess.Popen[str]:
    env = {**os.environ, "NEON_API_KEY": sim.personal_key}
    command = ["sync", "--data-dir", str(data), "--base-url", sim.base_url, *extra]
    return subprocess.Popen(
        [sys.executable, "-m", "exporter", *command],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _stop_and_time(
    proc: subprocess.Popen[str], signum: int, *, timeout: float
) -> tuple[str, str, float]:
    """`signum` sent to the running `proc`: its stdout, its stderr and the seconds from the
    signal to its exit (killed if it outlives `timeout`, the test failing)."""
    assert proc.poll() is None, ("it ended before the signal", proc.communicate())
    proc.send_signal(signum)
    signalled = time.monotonic()
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return out, err, time.monotonic() - signalled


def _child_last_line(script: str, data: Path, sim: Any, *args: str) -> str:
    """`script` (a sync through the library, patched) run in a child process on `data` against
    `sim` (argv: data, base URL, key, `args`): the last line it printed; it must exit 0."""
    child = subprocess.run(
        [sys.executable, "-c", script, str(data), sim.base_url, sim.personal_key, *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    return child.stdout.splitlines()[-1]


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
    proc = _sync_process(sim, data, "--max-rps", "0", "--concurrency", "2")
    deadline = time.monotonic() + 60
    while (
        sim.stats()["by_route"].get(OPS_ROUTE, 0) < 10
        and time.monotonic() < deadline
        and proc.poll() is None
    ):
        time.sleep(0.05)
    out, err, elapsed = _stop_and_time(proc, signum, timeout=60)
    assert proc.returncode == code, out + err
    assert elapsed < PROMPT, f"{elapsed:.1f}s from the signal to the exit"
    again = "Ctrl-C again" if signum == signal.SIGINT else "SIGINT"  # SIGTERM: not a terminal
    assert (
        f"{signal.Signals(signum).name}: stopping; committing what was read ({again} to abort "
        "at once)\n"
    ) in err
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


# In a child process: a sync through the library API whose last commit (the one the end of the
# walks asks for) gets a SIGINT after its stop was set (the second Ctrl-C: KeyboardInterrupt) at
# its start, in the main
# thread waiting for it, and goes on once the main thread looked at the lock. Prints whether the
# data directory was locked right after the abort, and whether it was free once the committer
# ended.
_ABORT_IN_THE_LAST_COMMIT = """
import json, signal, sys, threading, time
from pathlib import Path
import exporter.engine.sync as S
import exporter.events.follower as F
import exporter.store.local.dataset as D
from exporter.core.errors import LockHeldError
from exporter.events.config import EventsConfig
from exporter.store.state import DataDirLock

data, base_url, key, events = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
signal.signal(signal.SIGINT, signal.default_int_handler)  # even if started with it ignored
main, closing, checked = threading.main_thread().ident, threading.Event(), threading.Event()
stop = threading.Event()
close, commit = S._Committer.close, D.Dataset.commit


def close_marked(self):
    closing.set()
    close(self)


def waiting(ident):  # blocked in a threading wait (an Event's, a Condition's, a join)
    frame = sys._current_frames().get(ident)
    return frame is not None and frame.f_code.co_filename == threading.__file__


def slow_last_commit(self, *args, **kwargs):
    if closing.is_set() and threading.current_thread().name == "opsaudit-committer":
        # Once the main thread waits: a signal handled just before it blocks would go unseen
        # until it wakes (after this commit).
        while not waiting(main):
            time.sleep(0.001)
        time.sleep(0.05)
        stop.set()  # the first Ctrl-C, as the CLI's handler takes it
        signal.pthread_kill(main, signal.SIGINT)
        checked.wait(10)  # the commit goes on once the lock was looked at
    return commit(self, *args, **kwargs)


S._Committer.close, D.Dataset.commit = close_marked, slow_last_commit
write, during_append = F.FileFollower._write, []


def slow_last_append(self, batches):
    # The last commit's events appended on a thread of their own, after the commit.
    if threading.current_thread().name == "opsaudit-events-file":
        time.sleep(0.5)  # the committer has ended meanwhile
        during_append.append(locked())
    write(self, batches)


F.FileFollower._write = slow_last_append


def locked():
    lock = DataDirLock(data / D.LOCK_FILE)
    try:
        lock.acquire(wait=False)
    except LockHeldError:
        return True
    lock.release()
    return False


sink = EventsConfig(file=data.parent / "events.jsonl", backfill=True) if events else None
config = S.SyncConfig(data_dir=data, api_key=key, base_url=base_url, max_rps=None,
                      commit_seconds=60, refresh_open_every=0, events=sink)
try:
    S.sync(config, None, stop)
    aborted = False
except KeyboardInterrupt:
    aborted = True
after_abort = locked()
checked.set()
deadline = time.monotonic() + 30
while any(t.name in ("opsaudit-committer", "opsaudit-events-file")
          for t in threading.enumerate()):
    assert time.monotonic() < deadline
    time.sleep(0.02)
print(json.dumps({"aborted": aborted, "locked_after_abort": after_abort,
                  "locked_during_the_last_append": during_append,
                  "locked_after_the_commit": locked()}))
"""


@pytest.mark.parametrize("events", [False, True])
def test_ctrl_c_twice_during_the_last_commit_keeps_the_lock_until_it_ended(
    make_sim: Any, tmp_path: Path, events: bool
) -> None:
    """The second Ctrl-C aborts at once, even during the run's last commit, but the data
    directory stays locked until that commit ended (and the events file's append it started,
    `events`): before, CPython 3.11's `Thread.join`, cut by the Ctrl-C, took the committer for
    ended, and the run recorded itself and released the lock (another run could start) with
    the commit still being written. The next run is exact."""
    sim = make_sim(seed=1916, projects=3, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    last = _child_last_line(_ABORT_IN_THE_LAST_COMMIT, data, sim, "events" if events else "")
    appends = "[true]" if events else "[]"
    assert last == (
        '{"aborted": true, "locked_after_abort": true, '
        f'"locked_during_the_last_append": {appends}, "locked_after_the_commit": false}}'
    )
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


# In a child process: a sync whose listing gets the second Ctrl-C (KeyboardInterrupt in the
# main thread) after its first page; prints the outcome and error its run was recorded with.
_ABORT_IN_THE_LISTING = """
import json, sqlite3, sys
from pathlib import Path
import exporter.engine.sync as S

data, base_url, key, twice = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4] == "twice"
listed = S._Run._listed


def listed_then_ctrl_c(self, projects, scope):
    listed(self, projects, scope)
    if twice:
        self.stop.set()  # the first Ctrl-C, as the CLI's handler takes it
    raise KeyboardInterrupt


S._Run._listed = listed_then_ctrl_c
try:
    S.sync(S.SyncConfig(data_dir=data, api_key=key, base_url=base_url, max_rps=None))
except KeyboardInterrupt:
    pass
con = sqlite3.connect(data / "state.sqlite")
print(json.dumps(con.execute("SELECT outcome, error FROM runs").fetchall()))
"""


@pytest.mark.parametrize(
    ("times", "error"),
    [("once", "interrupted while listing"), ("twice", "interrupted (Ctrl-C twice)")],
)
def test_ctrl_c_while_listing_is_recorded_as_interrupted_not_failed(
    make_sim: Any, tmp_path: Path, times: str, error: str
) -> None:
    """The second Ctrl-C before the walks began (the committer not started) recorded the run
    as `failed` with the error `KeyboardInterrupt` (thirteenth review): it was interrupted,
    as after the first. A library call's first Ctrl-C there stops the run as the CLI's."""
    sim = make_sim(seed=1917, projects=2, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    last = _child_last_line(_ABORT_IN_THE_LISTING, data, sim, times)
    assert json.loads(last) == [["interrupted", error]]
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


def _signal_once(proc: subprocess.Popen[str], sim: Any, requests: int) -> tuple[int, float]:
    """SIGINT once the simulator got `requests`; (its count then, seconds to the exit)."""
    deadline = time.monotonic() + 60
    while sim.stats()["requests"] < requests and time.monotonic() < deadline:
        assert proc.poll() is None, "the sync ended before it could be interrupted"
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    count, signalled = sim.stats()["requests"], time.monotonic()
    try:
        proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return count, time.monotonic() - signalled


def test_a_signal_cuts_a_request_whose_answer_trickles(make_sim: Any, tmp_path: Path) -> None:
    """Every answer sent a byte every 50 ms (no silence the read timeout sees): Ctrl-C waited
    for the request in flight, for ever (a reviewer's sync still ran 60 s after it). The stop
    cuts the requests in flight."""
    sim = make_sim(seed=1918, projects=2, shared_projects=0, orgs=1, days=1)
    sim.faults = Faults(trickle_seconds=0.05)
    data = tmp_path / "d"
    proc = _sync_process(sim, data, "--max-rps", "0")
    _, elapsed = _signal_once(proc, sim, 1)
    assert proc.returncode == 130
    assert elapsed < PROMPT, f"{elapsed:.1f}s from the signal to the exit"
    con = sqlite3.connect(data / "state.sqlite")
    try:
        assert con.execute("SELECT outcome, error FROM runs").fetchall() == [
            ("interrupted", "interrupted while listing")
        ]
    finally:
        con.close()
    sim.faults = Faults()
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


def test_a_signal_sends_no_request_waiting_for_its_pacing_slot(
    make_sim: Any, tmp_path: Path
) -> None:
    """At 1 request a second with four walks, each walk waits up to 4 s for its slot: after
    Ctrl-C those waiting sent their request anyway, one a second (the account's shared budget
    spent, the exit 4 s late). None is sent after the signal."""
    sim = make_sim(seed=1919, projects=12, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    proc = _sync_process(sim, data, "--max-rps", "1", "--concurrency", "4")
    count, elapsed = _signal_once(proc, sim, 4)
    assert proc.returncode == 130
    # One may have left before the signal and arrived after it.
    assert sim.stats()["requests"] - count <= 1, (count, sim.stats()["requests"])
    assert elapsed < PROMPT, f"{elapsed:.1f}s from the signal to the exit"


# In a child process: a sync through the library API (no signal handler: Ctrl-C is a
# KeyboardInterrupt in the main thread), Ctrl-C at its tenth page; prints the seconds from it to
# the KeyboardInterrupt out of `sync`, the run's record and whether the data directory is free.
_CTRL_C_IN_A_LIBRARY_CALL = (
    _ON_THE_WAY
    + """
import _thread, json, sqlite3, sys, time
from pathlib import Path
import exporter.engine.sync as S
from exporter.store.local.dataset import Dataset

data, base_url, key = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
sent = []
def ctrl_c():
    sent.append(time.monotonic())
    _thread.interrupt_main()
on_the_way(ctrl_c)
config = S.SyncConfig(data_dir=data, api_key=key, base_url=base_url, max_rps=None, concurrency=2)
try:
    S.sync(config)
    raised = None
except KeyboardInterrupt:
    raised = time.monotonic() - sent[0]
Dataset(data).close()  # LockHeldError if a thread of the run still holds it
con = sqlite3.connect(data / "state.sqlite")
print(json.dumps([raised, con.execute("SELECT outcome, error FROM runs").fetchall()]))
"""
)


def test_ctrl_c_in_a_library_call_stops_the_sync_and_records_it_interrupted(
    make_sim: Any, tmp_path: Path
) -> None:
    """In a notebook, Ctrl-C is a KeyboardInterrupt, not the CLI's signal handler: it surfaced
    only after every project was synced (9 s on), the run recorded `killed` and its committer
    still holding the lock (the next cell: LockHeldError). It now stops the run as the CLI's
    first Ctrl-C does, and is raised once the run is recorded `interrupted`."""
    projects = 40
    sim = make_sim(
        seed=1920, projects=projects, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=20
    )
    # 12 s for the whole backfill at least: 9 s left at the tenth page when nothing stops it
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.2)
    data = tmp_path / "d"
    last = _child_last_line(_CTRL_C_IN_A_LIBRARY_CALL, data, sim)
    raised, runs = json.loads(last)
    assert raised is not None and raised < PROMPT, raised
    assert runs == [["interrupted", None]]
    assert 1 <= _walked(data) < projects
    sim.faults = Faults()
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


# In a child process: a library sync whose last commit, or its compaction, gets Ctrl-C (a real
# SIGINT, Python's handler: a KeyboardInterrupt in the main thread, waiting for that commit or
# compacting). Prints whether KeyboardInterrupt was raised, the run's record and whether the data
# directory is free.
_CTRL_C_PAST_THE_WALKS = """
import json, os, signal, sqlite3, sys, time
from pathlib import Path
import exporter.engine.sync as S
from exporter.store.local.dataset import Dataset

data, base_url, key, where = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


def ctrl_c():
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(0.5)  # the handler raises in the main thread meanwhile


if where == "last commit":
    commit = S._Committer._commit
    def last_commit(self, chunks, last=False):
        if last:
            ctrl_c()
        return commit(self, chunks, last=last)
    S._Committer._commit = last_commit
else:
    compact = Dataset.compact
    def compaction(self, partitions):
        ctrl_c()
        return compact(self, partitions)
    Dataset.compact = compaction
try:
    S.sync(S.SyncConfig(data_dir=data, api_key=key, base_url=base_url, max_rps=None))
    raised = False
except KeyboardInterrupt:
    raised = True
Dataset(data).close()  # LockHeldError if a thread of the run still holds it
con = sqlite3.connect(data / "state.sqlite")
print(json.dumps([raised, con.execute("SELECT outcome, error FROM runs").fetchall()]))
"""


@pytest.mark.parametrize("where", ["last commit", "compaction"])
def test_ctrl_c_past_the_walks_in_a_library_call_records_the_run_interrupted(
    make_sim: Any, tmp_path: Path, where: str
) -> None:
    """One Ctrl-C while a library sync waited for its last commit took the abort path: the
    run was left `running` (the next run said `killed`); during its compaction, it said
    "interrupted (Ctrl-C twice)". Either is the CLI's first Ctrl-C: recorded `interrupted`."""
    sim = make_sim(seed=1921, projects=2, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    last = _child_last_line(_CTRL_C_PAST_THE_WALKS, data, sim, where)
    assert json.loads(last) == [True, [["interrupted", None]]]
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


# In a child process: a library sync in a task whose timeout is a SIGALRM handler raising an
# ordinary Exception in the main thread (Airflow's execution_timeout; its SIGTERM handler does
# the same), or `sys.exit` (a script's SIGTERM handler: SystemExit), at its tenth page; prints the
# seconds from it to the exception out of `sync`, its type and message, the run's record and
# whether the data directory is free.
_AN_EXCEPTION_FROM_A_SIGNAL_HANDLER = (
    _ON_THE_WAY
    + """
import json, os, signal, sqlite3, sys, time
from pathlib import Path
import exporter.engine.sync as S
from exporter.store.local.dataset import Dataset

data, base_url, key, kind = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
class AirflowTaskTimeout(Exception):
    pass
sent = []
def on_alarm(signum, frame):
    sent.append(time.monotonic())
    if kind == "exit":
        sys.exit("terminated")
    raise AirflowTaskTimeout("Timeout, PID: 1234")
signal.signal(signal.SIGALRM, on_alarm)
on_the_way(lambda: os.kill(os.getpid(), signal.SIGALRM))
config = S.SyncConfig(data_dir=data, api_key=key, base_url=base_url, max_rps=None, concurrency=2)
try:
    S.sync(config)
    raised = None
except (AirflowTaskTimeout, SystemExit) as exc:
    raised = [time.monotonic() - sent[0], type(exc).__name__, str(exc)]
Dataset(data).close()  # LockHeldError if a thread of the run still holds it
con = sqlite3.connect(data / "state.sqlite")
print(json.dumps([raised, con.execute("SELECT outcome, error FROM runs").fetchall()]))
"""
)


@pytest.mark.parametrize(
    ("kind", "exception"),
    [
        ("exception", ["AirflowTaskTimeout", "Timeout, PID: 1234"]),
        ("exit", ["SystemExit", "terminated"]),
    ],
)
def test_an_exception_from_a_signal_handler_in_a_library_call_stops_the_sync_at_once(
    make_sim: Any, tmp_path: Path, kind: str, exception: list[str]
) -> None:
    """Airflow's execution_timeout (a SIGALRM handler) raises an ordinary Exception in the main
    thread: it surfaced only once every walk had run to its end (the whole backfill read past
    the task's timeout), the run recorded `failed`. It now stops new requests at once, as a
    stop does; what was read is committed, the run recorded `failed` with the exception, which
    is raised unchanged; the next run continues and is exact. A script's SIGTERM handler that
    calls `sys.exit` (SystemExit, no Exception) took the abort path: what was read was left
    uncommitted and the run `running`, for the next run to call killed; it is the same stop."""
    projects = 40
    sim = make_sim(
        seed=1922, projects=projects, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=20
    )
    # 12 s for the whole backfill at least: 9 s left at the tenth page when nothing stops it
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.2)
    data = tmp_path / "d"
    last = _child_last_line(_AN_EXCEPTION_FROM_A_SIGNAL_HANDLER, data, sim, kind)
    raised, runs = json.loads(last)
    assert raised is not None and raised[0] < PROMPT, raised
    assert raised[1:] == exception
    assert runs == [["failed", "stopped by {}: {}".format(*exception)]]
    assert 1 <= _walked(data) < projects // 2
    sim.faults = Faults()
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)


def _await_open(proc: subprocess.Popen[str], path: Path) -> None:
    """Until `proc` holds `path` open (a fixed sleep let a loaded machine's signal arrive
    before the sync's handlers were in place: the default action, not the test's subject)."""
    fds = Path(f"/proc/{proc.pid}/fd")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) == str(path) for fd in fds.iterdir()):
                return
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"{path} never opened: {proc.communicate()}")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_a_sync_waiting_for_the_lock(
    make_sim: Any, tmp_path: Path, signum: int, code: int
) -> None:
    """`sync --wait` queued behind another sync ignored Ctrl-C and SIGTERM: it said "stopping"
    and went on waiting for the lock (a blocking flock, restarted after the handler), for as
    long as the other run took, then synced: `systemctl stop` waited for its SIGKILL. It now
    exits at once (130 / 143), nothing read or written, and the next run syncs."""
    import fcntl

    sim = make_sim(seed=1916, projects=2, shared_projects=0, orgs=1, days=1)
    data = tmp_path / "d"
    data.mkdir()
    holder = os.open(data / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        os.write(holder, f"{os.getpid()}\n".encode())  # a live holder: a sync under way
        proc = _sync_process(sim, data, "--wait", "--max-rps", "0")
        _await_open(proc, data / ".lock")  # waiting for it, its stop handlers in place
        out, err, elapsed = _stop_and_time(proc, signum, timeout=30)
    finally:
        os.close(holder)
    assert (proc.returncode, out, err.splitlines()[-1]) == (
        code,
        "",
        f"Error: stopped while waiting for the lock {data / '.lock'} (another opsaudit sync "
        "holds it): nothing was read or written; the next run syncs",
    )
    assert elapsed < PROMPT, f"{elapsed:.1f}s from the signal to the exit"
    assert sim.stats()["requests"] == 0
    assert not (data / "state.sqlite").exists()
    assert run_sync(sim, data).outcome == "ok"
    assert_matches_truth(sim, data)
