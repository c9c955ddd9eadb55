"""Two data directories, one events file (two cron jobs, one per organization, and one log
shipper tailing one file): their runs append whole batches one after the other; neither cuts
what the other is appending for a torn line."""

from __future__ import annotations

import fcntl
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from .conftest import child_env, file_events, versions_after

# The sync of data directory A in a child process: every commit's events go to its child
# appender, whose program writes the first half of its first write, says so (the file
# `paused`), and writes nothing more until the test creates the file `go`: A's append stands
# half written, its last line torn, for as long as the test wants.
_PAUSED_APPENDER = """
import os, sys, time
from pathlib import Path
paused, go = Path(sys.argv[2]), Path(sys.argv[3])
write = os.write
def halting(fd, data):
    if paused.exists():
        return write(fd, data)
    n = write(fd, bytes(memoryview(data)[: len(data) // 2]))
    paused.touch()
    while not go.exists():
        time.sleep(0.02)
    return n
os.write = halting
from exporter.events.appender import main
sys.exit(main(sys.argv[1]))
"""
_SYNC_A = """
import dataclasses, subprocess, sys, types
import exporter.engine.sync as e, exporter.events.appender as a, exporter.events.follower as f
f.CHILD_EVENTS = 1
sync = e.sync
e.sync = lambda config, *args: sync(dataclasses.replace(config, commit_chunks=1), *args)
program, paused, go = sys.argv[1:4]
def paused_appender(args, **kwargs):  # the same process options, the appender paused
    return subprocess.Popen([sys.executable, "-c", program, *args[3:], paused, go], **kwargs)
a.subprocess = types.SimpleNamespace(**{**vars(subprocess), "Popen": paused_appender})
from exporter.cli import main
sys.argv = ["opsaudit", "sync", "--max-rps", "0", "--events-backfill"]
main()
"""


BACKFILL = ["--events-backfill"]


def _await(what: str, done: Any, timeout: float = 60) -> None:
    until = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < until, f"{what}: not within {timeout:g}s"
        time.sleep(0.05)


def test_two_data_directories_appending_to_one_file_cut_nothing_of_each_other(
    make_sim: Any, tmp_path: Path
) -> None:
    """A's appender stands in the middle of an append (half a line written); B's sync, another
    data directory to the same file, runs meanwhile: it waits for A's append to end, then
    appends its own. It cut A's half line for a torn one, and A's append went on mid-line
    after B's lines: a line that is no JSON, an event of A's lost."""
    sim_a = make_sim(seed=41, projects=2, days=5, ops_per_project_per_day=20)
    sim_b = make_sim(seed=42, projects=2, days=3, ops_per_project_per_day=15)
    data_a, data_b = tmp_path / "a", tmp_path / "b"
    events_file = tmp_path / "events.jsonl"
    paused, go = tmp_path / "paused", tmp_path / "go"
    with open(tmp_path / "a.err", "wb") as a_err, open(tmp_path / "b.err", "wb") as b_err:
        try:
            a = subprocess.Popen(
                [sys.executable, "-c", _SYNC_A, _PAUSED_APPENDER, str(paused), str(go)],
                env=child_env(sim_a, data_a, events_file),
                stdout=subprocess.DEVNULL,
                stderr=a_err,
            )
            _await("A's appender paused mid-append", paused.exists)
            torn = events_file.read_bytes()
            assert torn and not torn.endswith(b"\n"), "A's append is not half written"
            b = subprocess.Popen(
                [sys.executable, "-m", "exporter", "sync", "--max-rps", "0", "-v", *BACKFILL],
                env=child_env(sim_b, data_b, events_file),
                stdout=subprocess.DEVNULL,
                stderr=b_err,
            )
            # B ends (it did not wait for A), or says it waits for A's append to end.
            _await(
                "B's sync waiting or done",
                lambda: (
                    b.poll() is not None or b"waits for it" in (tmp_path / "b.err").read_bytes()
                ),
            )
            go.touch()
            assert (a.wait(timeout=120), b.wait(timeout=120)) == (0, 0), (
                tmp_path / "a.err"
            ).read_text() + (tmp_path / "b.err").read_text()
        finally:
            go.touch()  # A's appender never waits for ever
    expected_a, expected_b = versions_after(data_a, set()), versions_after(data_b, set())
    assert expected_a and expected_b and not expected_a.keys() & expected_b.keys()
    ids = [e["id"] for e in file_events(events_file)]  # every line whole JSON
    assert len(ids) == len(set(ids)), "an event is in the file twice"
    assert sorted(ids) == sorted(expected_a | expected_b)


def test_an_append_that_waited_for_a_file_rotated_meanwhile_goes_to_the_new_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another writer holds the file's lock; logrotate renames the file meanwhile: the append
    that waited goes to the file the path names now (the shipper's), not the rotated one."""
    from exporter.core.layout import write_all
    from exporter.events.eventsfile import locked

    path, rotated = tmp_path / "events.jsonl", tmp_path / "events.jsonl.1"
    path.write_bytes(b'{"id":"old:1"}\n')
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another writer's append under way
    last: list[bytes | None] = []

    def append() -> None:
        with locked(path) as (fd, line):
            last.append(line)
            write_all(fd, b'{"id":"new:1"}\n')

    caplog.set_level(logging.INFO, "opsaudit.events")
    thread = threading.Thread(target=append)
    thread.start()
    try:
        _await("the append waiting", lambda: "waits for it" in caplog.text)
        path.rename(rotated)
    finally:
        os.close(holder)  # the other writer's append ended
        thread.join(30)
    assert rotated.read_bytes() == b'{"id":"old:1"}\n'
    assert (path.read_bytes(), last) == (b'{"id":"new:1"}\n', [None])


def test_a_file_whose_filesystem_cannot_lock_is_appended_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """NFS without its lock daemon answers flock with ENOLCK: every append failed on it, so the
    events waited run after run, for ever. It appends unlocked and says what that risks."""
    import errno

    from exporter.core.layout import write_all
    from exporter.events.eventsfile import locked

    def no_locks(fd: int, operation: int) -> None:
        raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))

    monkeypatch.setattr(fcntl, "flock", no_locks)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"id":"old:1"}\n{"id":"torn')
    caplog.set_level(logging.INFO, "opsaudit.events")
    with locked(path) as (fd, line):
        write_all(fd, b'{"id":"new:1"}\n')
    with locked(path) as (fd, _):  # the next commit's append: said once
        write_all(fd, b'{"id":"new:2"}\n')
    assert (path.read_bytes(), line) == (
        b'{"id":"old:1"}\n{"id":"new:1"}\n{"id":"new:2"}\n',
        b'{"id":"old:1"}',
    )
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == [
        f"events file {path}: its filesystem cannot lock it (No locks available): appended "
        "without the lock, so no other data directory's runs may append to this file",
        "events file: cut a torn last line of 11 bytes (a run was killed while appending)",
    ]


def test_a_lock_held_past_the_wait_fails_the_append_and_names_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A program holding the file's lock for longer than LOCK_WAIT: the append fails (its
    events wait for the next run), saying who holds such a lock; nothing is written."""
    from exporter.events import eventsfile

    monkeypatch.setattr(eventsfile, "LOCK_WAIT", 0.3)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"id":"old:1"}\n')
    holder = os.open(path, os.O_RDWR)
    fcntl.flock(holder, fcntl.LOCK_EX)
    raised: list[BaseException] = []

    def append() -> None:
        try:
            with eventsfile.locked(path):
                pass
        except OSError as exc:
            raised.append(exc)

    thread = threading.Thread(target=append, daemon=True)  # left behind if it never ends
    try:
        started = time.monotonic()
        thread.start()
        thread.join(10)
        waited = time.monotonic() - started
    finally:
        os.close(holder)
    assert [str(exc) for exc in raised] == [
        "[Errno 11] another process held its lock for 0.3s (a sync of another data directory "
        "appending to it, or a program holding its flock)"
    ]
    assert 0.3 <= waited < 5
    assert path.read_bytes() == b'{"id":"old:1"}\n'
