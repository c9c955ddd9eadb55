"""The events file's appends in a child process (`exporter.events.appender`): an events backfill's
commits of many events are built and appended outside the walks' GIL; the file stays exact, each
event once, through the child's death and the sync's, and the lock is held while it appends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from exporter.events import appender, follower
from exporter.events.webhook import read_webhook_secret

from .conftest import Receiver, child_env, file_events, sync_events, versions_after

PER_CHUNK = {"commit_chunks": 1}  # a commit per chunk: appends before the last one


@pytest.fixture
def children(monkeypatch: pytest.MonkeyPatch) -> list[appender.ChildAppender]:
    """Every commit's events go to a child appender (not only those of 20,000 or more); the
    children started, in order."""
    started: list[appender.ChildAppender] = []
    start = appender.ChildAppender.__init__

    def recorded(self: appender.ChildAppender, *args: Any) -> None:
        start(self, *args)
        started.append(self)

    monkeypatch.setattr(follower, "CHILD_EVENTS", 1)
    monkeypatch.setattr(appender.ChildAppender, "__init__", recorded)
    return started


def test_the_childs_appends_are_the_bytes_built_at_delivery(
    make_sim: Any,
    tmp_path: Path,
    receiver: Receiver,
    secret_file: Path,
    children: list[appender.ChildAppender],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A backfill of many commits (rows written ahead, pieces of 3 events) appended by the
    child: each event once, in commit order, the same bytes as the webhook's (built from the
    committed rows by the end-of-run delivery); then an incremental run appends after them."""
    from exporter.events import outbox

    monkeypatch.setattr(outbox, "PIECE_EVENTS", 3)
    sim = make_sim(seed=31, projects=3, days=30, ops_per_project_per_day=3)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    key = read_webhook_secret(secret_file)
    hook = {"webhook_url": receiver.url, "webhook_key": key, "webhook_backoff": 0.01}
    first = sync_events(
        sim, data, PER_CHUNK, commit_seconds=0.05, file=events_file, backfill=True, **hook
    )
    expected = versions_after(data, set())
    assert first.outcome == "ok" and first.events_pending == 0 and len(expected) > 100
    assert len(children) == 1 and children[0].proc.returncode == 0  # ended with the run
    lines = events_file.read_bytes().splitlines()
    ids = [orjson.loads(line)["id"] for line in lines]
    assert sorted(ids) == sorted(expected) and len(ids) == len(set(ids))
    by_id = dict(zip(ids, lines))
    assert sorted(receiver.ids()) == sorted(expected)
    assert all(r.body == by_id[r.id] for r in receiver.received)
    sim.add_operations(sim.project_ids()[0], 40, same_second=False)
    second = sync_events(sim, data, PER_CHUNK, commit_seconds=0.05, file=events_file)
    assert second.outcome == "ok" and second.events_pending == 0
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids))
    assert sorted(ids) == sorted(versions_after(data, {first.run_id}) | expected)


def test_a_child_killed_mid_run_leaves_the_file_to_the_end_of_run_delivery(
    make_sim: Any,
    tmp_path: Path,
    children: list[appender.ChildAppender],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The child dies (SIGKILL) once it was handed a whole append, before it wrote any of it
    (stopped from before the hand-over): the follower stops, nothing it was handed is marked,
    and the end-of-run delivery appends it: each event once."""
    append = appender.ChildAppender.append

    def killed(self: appender.ChildAppender, *args: Any) -> None:
        if self is children[0]:
            os.kill(self.proc.pid, signal.SIGSTOP)
        append(self, *args)
        if self is children[0]:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    monkeypatch.setattr(appender.ChildAppender, "append", killed)
    sim = make_sim(seed=32, projects=3, days=10, ops_per_project_per_day=5)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    summary = sync_events(sim, data, PER_CHUNK, commit_seconds=60, file=events_file, backfill=True)
    assert len(children) == 1 and children[0].proc.returncode == -signal.SIGKILL
    assert summary.outcome == "ok" and summary.events_pending == 0
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids)), "an event is in the file twice"
    assert sorted(ids) == sorted(versions_after(data, set()))


# A sync in a child process whose appender takes every commit's events and writes each piece a
# second late (its program run with os.write slowed), and which is killed (SIGKILL) as soon as
# it handed over the first append, before the appender answered: the appender finishes that
# append alone, holding the data directory's lock meanwhile.
_SLOW_APPENDER = """
import os, sys, time
write = os.write
def slow(fd, data):
    time.sleep(1)
    return write(fd, data)
os.write = slow
from exporter.events.appender import main
sys.exit(main(sys.argv[1]))
"""
_KILLED_BEFORE_THE_ANSWER = """
import os, signal, subprocess, sys, types
import dataclasses
import exporter.engine.sync as e, exporter.events.appender as a, exporter.events.follower as f
f.CHILD_EVENTS = 1
sync = e.sync
e.sync = lambda config, *args: sync(dataclasses.replace(config, commit_chunks=1), *args)
slow = sys.argv[1]
def slow_appender(args, **kwargs):  # the same process options, the appender slowed
    return subprocess.Popen([sys.executable, "-c", slow, *args[3:]], **kwargs)
a.subprocess = types.SimpleNamespace(**{**vars(subprocess), "Popen": slow_appender})
append = a.ChildAppender.append
def append_then_die(self, pieces):
    append(self, pieces)
    os.kill(os.getpid(), signal.SIGKILL)
a.ChildAppender.append = append_then_die
from exporter.cli import main
sys.argv = ["opsaudit", "sync", "--max-rps", "0", "--events-backfill"]
main()
"""


def test_a_sync_killed_during_the_childs_append_then_a_healthy_run(
    make_sim: Any, tmp_path: Path
) -> None:
    """The sync dies as its appender appends: the appender finishes alone, the data directory
    locked until it ended (no next run repairs the file's tail meanwhile); the next run marks
    what it appended without appending it again."""
    from exporter.store.local.dataset import LOCK_FILE
    from exporter.store.state import DataDirLock

    sim = make_sim(seed=33, projects=2, days=5, ops_per_project_per_day=20)
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    env = child_env(sim, data, events_file)
    # Its output to a file: a pipe would be held open by the appender, which inherits it.
    with open(tmp_path / "stderr", "wb") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", _KILLED_BEFORE_THE_ANSWER, _SLOW_APPENDER],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
        code = proc.wait(timeout=120)
    assert code == -signal.SIGKILL, (tmp_path / "stderr").read_text()
    before = file_events(events_file) if events_file.exists() else []
    lock = DataDirLock(data / LOCK_FILE)
    lock.acquire(wait=False)  # the sync is gone: waits for its appender, which holds the lock
    lock.release()
    appended = [e["id"] for e in file_events(events_file)]
    # The appender writes a piece a second: it had not ended when the sync died.
    assert len(appended) > len(before), "the lock was free before the appender ended"
    last = sync_events(sim, data, PER_CHUNK, commit_seconds=0.2, file=events_file, backfill=True)
    assert last.outcome == "ok" and last.events_pending == 0
    ids = [e["id"] for e in file_events(events_file)]
    assert len(ids) == len(set(ids)), "an event was appended twice"
    assert sorted(ids) == sorted(versions_after(data, set()))
