"""Scratch directories named for their process, and the processes that are gone.

A process that holds a copy of a dataset's state in a scratch directory (a run on object
storage, a reader of one) removes it when it ends; killed with kill -9 it cannot. So each is
named for its process (pid namespace, pid and start time), and the next one to make one first
removes those whose process is surely gone: a cron job killed now and then (the OOM killer, a
timeout) would otherwise fill the temporary directory with copies of the state.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from pathlib import Path


def read_text(path: str) -> str | None:
    """A small file's text (one of /proc's), stripped; None when it cannot be read."""
    try:
        with open(path) as fh:
            return fh.read().strip()
    except OSError:
        return None


def pid_namespace() -> str | None:
    """This process's pid namespace ("pid:[4026531836]"): pids compare only within one."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return None


def process_started(pid: int) -> str | None:
    """The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22), None
    if there is no such process (or no /proc)."""
    stat = read_text(f"/proc/{pid}/stat")
    if stat is None:
        return None
    fields = stat.rsplit(")", 1)[-1].split()  # the name in parentheses may hold spaces
    return fields[19] if len(fields) > 19 else None


def scratch_dir(prefix: str) -> Path:
    """A new directory in the temporary directory, `prefix` then this process's tag; first,
    those of `prefix` whose process is surely gone are removed."""
    base = Path(tempfile.gettempdir())
    owner = _process_tag(os.getpid())
    if owner is not None:
        namespace = owner.split("-", 1)[0]
        with contextlib.suppress(OSError):
            for path in base.glob(f"{prefix}{namespace}-*"):
                parts = path.name[len(prefix) :].split("-")
                if len(parts) >= 4 and parts[1].isdigit() and _gone(int(parts[1]), parts[2]):
                    shutil.rmtree(path, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{owner}-" if owner else prefix, dir=base))


def _gone(pid: int, started: str) -> bool:
    """Whether the process that named a scratch directory is gone: no process has its pid,
    or one started at another time has (the pid reused). Unsure (its start unreadable): not."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:  # alive, another user's
        pass
    now = process_started(pid)
    return now is not None and now != started


def _process_tag(pid: int) -> str | None:
    """ "NAMESPACE-PID-STARTED" of a process of this pid namespace; None where /proc does not
    say, or is another namespace's (then no directory is taken for a dead process's)."""
    try:
        if int(os.readlink("/proc/self")) != os.getpid():  # /proc mounted for another one
            return None
    except (OSError, ValueError):
        return None
    namespace = pid_namespace()
    if namespace is None:
        return None
    started = process_started(pid)
    digits = "".join(c for c in namespace if c.isdigit())
    return f"{digits}-{pid}-{started}" if started and digits else None


__all__ = ["pid_namespace", "process_started", "read_text", "scratch_dir"]
