"""The events file's lock and tail (issue 22): every append to it, by the end-of-run delivery,
the follower or the child appender, is made holding an exclusive `flock` on the file, its torn
last line (a writer killed mid-append) cut first.

Two data directories may append to one file (two cron jobs, one per organization, and one log
shipper tailing it). Unlocked, a run cut as torn the last line of another's append in progress
(a line half written), and that append went on mid-line after the lines appended meanwhile: a
line that is no JSON, an event lost. Locked, the writers append whole batches one after the
other: a torn last line seen under the lock is one its writer will never finish (the kernel
drops a dead process's lock; the child appender of a killed sync holds its own until its append
ended), and an append cut back after a failure (`appended_whole`) cuts only its own bytes.

The lock is on the events file itself, not on a sibling lock file: nothing more in a log
directory a shipper may glob or logrotate may rotate (a rotated lock file would let two
writers in at once), no need to create files there. A rotation by renaming moves the file and
its lock together; a writer that waited for the lock of a file renamed meanwhile opens the new
one, so its lines go where the shipper reads. flock, not fcntl's record locks: those are the
process's, released by the close of any descriptor of the file in it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
from collections.abc import Iterator
from pathlib import Path

__all__ = ["NOT_A_FILE", "locked"]

log = logging.getLogger("opsaudit.events")

_TAIL_BLOCK = 65536
# How long an append waits for another writer's: one batch's write and fsync take well under a
# second; a lock held longer is a stuck process, and the events wait for the next run.
LOCK_WAIT = 60.0
_POLL = 0.02
_REOPENS = 10  # renamed under us this many times in a row: appended to the last one opened

NOT_A_FILE = (
    "not a regular file (a pipe, a terminal or a device: its last line cannot be read back, so "
    "what a run wrote there would be written again by every later one)"
)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[tuple[int, bytes | None]]:
    """The events file at `path` (created if missing) opened for appending, its lock held and
    its torn last line cut: (its descriptor, its last complete line or None). OSError if it is
    not a regular file (`NOT_A_FILE`), cannot be opened, or stays locked for LOCK_WAIT s."""
    fd = _open_locked(path)
    try:
        yield fd, repair_tail(fd)
    finally:
        os.close(fd)  # the lock goes with the file's only descriptor


def _open_locked(path: Path) -> int:
    for attempt in range(_REOPENS):
        # Read and write: a named pipe no program reads is refused below, not waited for in
        # open (as a writer's open would).
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_NONBLOCK, 0o644)
        try:
            # Before anything is written: a pipe's fsync fails (EINVAL) after the append, so
            # the events stayed pending and every run wrote the whole backlog to it again.
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise OSError(errno.EINVAL, NOT_A_FILE)
            _lock(fd, path)
            if _still_named(fd, path) or attempt + 1 == _REOPENS:
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)  # renamed (rotated) while this run waited: append to the new file
    raise AssertionError("unreachable")


# A filesystem that cannot lock (NFS without its lock daemon: ENOLCK; some FUSE mounts): the
# append goes on unlocked, with a warning. Refusing would hold every event back run after run,
# for a risk (two writers at once) that only a file shared by two data directories runs.
_CANNOT_LOCK = frozenset({errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS})
_WARNED_UNLOCKED: set[Path] = set()  # said once a process: a run appends once a commit


def _lock(fd: int, path: Path) -> None:
    """Polled, not a blocking flock: a writer stuck holding it delays the run LOCK_WAIT s."""
    until = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            pass
        except OSError as exc:
            if exc.errno not in _CANNOT_LOCK:
                raise
            if path in _WARNED_UNLOCKED:
                return
            _WARNED_UNLOCKED.add(path)
            log.warning(
                "events file %s: its filesystem cannot lock it (%s): appended without the lock, "
                "so no other data directory's runs may append to this file",
                path,
                os.strerror(exc.errno or 0),
            )
            return
        if until is None:
            log.info(
                "events file %s: another process is appending to it; this run waits for it", path
            )
            until = time.monotonic() + LOCK_WAIT
        elif time.monotonic() >= until:
            raise OSError(
                errno.EAGAIN,
                f"another process held its lock for {LOCK_WAIT:g}s (a sync of another data "
                "directory appending to it, or a program holding its flock)",
            )
        time.sleep(_POLL)


def _still_named(fd: int, path: Path) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (named.st_dev, named.st_ino) == (mine.st_dev, mine.st_ino)


def repair_tail(fd: int) -> bytes | None:
    """Cut a torn last line (a kill mid-append); return the last complete line, or None. Only
    under the file's lock: unlocked, another writer's append in progress looks torn."""
    size = os.fstat(fd).st_size
    if size == 0:
        return None
    end = size
    tail = b""
    # Read backwards until the tail holds the last newline and the one before it (or the start).
    while True:
        start = max(0, end - _TAIL_BLOCK)
        tail = os.pread(fd, end - start, start) + tail
        end = start
        complete = tail.rfind(b"\n")
        if complete >= 0 and (tail.rfind(b"\n", 0, complete) >= 0 or start == 0):
            break
        if start == 0:
            break
    last_newline = tail.rfind(b"\n")
    keep = end + last_newline + 1  # 0 when no newline at all: the whole file is one torn line
    if keep != size:
        log.warning(
            "events file: cut a torn last line of %d bytes (a run was killed while appending)",
            size - keep,
        )
        os.ftruncate(fd, keep)
        os.fsync(fd)
    if last_newline < 0:
        return None
    previous = tail.rfind(b"\n", 0, last_newline)
    return tail[previous + 1 : last_newline]
