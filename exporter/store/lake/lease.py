"""One writer per dataset: a lease object taken and renewed with conditional writes.

The lease is `_opsaudit/lease.json` under the dataset root:
`{"holder": "host:pid", "token": "<uuid>", "ttl_s": 120, "released": false, ...}`.

- take: create it with If-None-Match: * ; if it exists and is released or expired, replace it
  with If-Match: <the etag we read> (so of two takers exactly one wins);
- renew: rewrite it with If-Match: <our last etag> every ttl/3 (a background thread); a failed
  renewal means someone took it: the holder is fenced (`check()` raises `LeaseLostError`);
- release: rewrite it as released with If-Match (no unconditional delete, so a release can never
  remove a lease that someone else has taken meanwhile).

Expiry is judged on the object store's clock alone: the lease object's Last-Modified plus its
ttl plus a grace (Last-Modified's whole seconds, a renewal's latency) is compared with the
store's "now", which a taker learns by writing a small object of its own (`_opsaudit/clock`) and
reading its Last-Modified, once per lease, then counting on by its monotonic clock. Compared
with the taker's wall clock, a machine 300 s ahead took a live writer's lease at once (the live
run then failed on a table write), one behind waited out its lag. A dead holder stops renewing
and loses the lease after ttl + grace whatever any machine's clock says. The holder fences
itself by its monotonic clock: past ttl - margin since its last successful renewal, `check()`
fails, before any commit.

A holder killed with `kill -9` cannot release, and waiting out its ttl blocked the next cron run
on the same machine (issue 19). So the lease also records who holds it: the machine (hostname,
boot id and pid namespace: two containers with one hostname are two machines) and the process
(pid and its start time, from /proc). A taker on the same machine takes the lease at once when
that process is gone, or when the pid now belongs to a process that started at another time (a
reused pid). A lease of another machine, or one whose holder cannot be checked (no /proc, an older
opsaudit), must expire.

The lease is a courtesy that keeps a second cron run from doing useless work; exactness does
not rest on it: every table commit carries `txn(dataset_id, N)` and Delta refuses a second commit
of the same transaction version (see `_tables.py`).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import NamedTuple

from exporter.core.errors import LockHeldError, StoppedError
from exporter.core.scratch import pid_namespace, process_started, read_text
from exporter.store.lake.objects import Objects, PreconditionFailed

LEASE_KEY = "_opsaudit/lease.json"
CLOCK_KEY = "_opsaudit/clock"  # a taker's probe of the store's clock (`Lease.store_now`)
DEFAULT_TTL = timedelta(seconds=120)
CLOCK_GRACE = timedelta(seconds=5)


class LeaseLostError(LockHeldError):
    """Our lease expired or was taken over: stop writing (exit code of a held lock). `reason`:
    set when the lease itself found it lost (`Lease.check`); a run that committed says so."""

    reason: str | None = None


def _this_machine() -> str | None:
    """Who "this machine" is for the holder check: hostname, boot id and pid namespace (pids are
    comparable only within one boot and one namespace); None where /proc does not say."""
    boot = read_text("/proc/sys/kernel/random/boot_id")
    namespace = pid_namespace()
    if not boot or namespace is None:
        return None
    return f"{socket.gethostname()}/{boot}/{namespace}"


def _wall_clock() -> datetime:
    return datetime.now(timezone.utc)


class Ended(NamedTuple):
    """A run that ended (`finished_us`, `outcome`, `error`) without its record reaching the
    store: the upload that would have carried it failed."""

    run_id: str
    started_us: int
    finished_us: int
    outcome: str
    error: str | None


def _ended(value: list[object]) -> Ended:
    run_id, started_us, finished_us, outcome, error = value
    return Ended(
        str(run_id),
        int(started_us),  # type: ignore[call-overload]
        int(finished_us),  # type: ignore[call-overload]
        str(outcome),
        None if error is None else str(error),
    )


@dataclass(frozen=True)
class LeaseInfo:
    holder: str
    token: str
    ttl: timedelta
    released: bool
    etag: str
    last_modified: datetime
    machine: str | None = None  # _this_machine() of the holder
    pid: int | None = None
    started: str | None = None  # process_started(pid) when it took the lease
    # The sync run it holds the lease for (`Lease.note_run`): a reader or the next writer tells
    # a killed run from a live one, even one killed before its first commit.
    run_id: str | None = None
    run_started_us: int | None = None
    # The runs of the unreleased leases it replaced (killed writers, `Lease.carried`), oldest
    # first: each may have died before its first commit, as this one may.
    earlier: tuple[tuple[str, int], ...] = ()
    # Runs that ended without their record reaching the store (`Ended`): the runs of this
    # holder and of those before it, until a commit of the state records them.
    unrecorded: tuple[Ended, ...] = ()

    def runs(self) -> list[tuple[str, int]]:
        """Every run this lease names, (id, started µs): those it carried, then its own."""
        own = [(self.run_id, self.run_started_us or 0)] if self.run_id is not None else []
        return [*self.earlier, *own]

    def live_run(self, now: datetime, grace: timedelta = CLOCK_GRACE) -> str | None:
        """The run holding the lease now, if it said which (None: none, or not said). A holder
        of another machine counts as live until its lease expires."""
        if self.is_free(now, grace) or self.holder_is_dead(_this_machine()):
            return None
        return self.run_id

    def holder_is_dead(self, machine: str | None) -> bool:
        """Whether the holder is certainly gone: a process of `machine` (ours) whose pid is not
        running, or runs a process that started at another time. False when unknown."""
        if machine is None or self.machine != machine or self.pid is None or not self.started:
            return False
        return process_started(self.pid) != self.started

    def expires_at(self, grace: timedelta = CLOCK_GRACE) -> datetime:
        return self.last_modified + self.ttl + grace

    def is_free(self, now: datetime, grace: timedelta = CLOCK_GRACE) -> bool:
        """Released, or expired at `now`, a time of the store's clock (`Lease.store_now`)."""
        return self.released or now >= self.expires_at(grace)


# Runs killed one after the other before their first commit, named in the lease at most.
_CARRIED_AT_MOST = 20


class Lease:
    """The writer lease of one dataset."""

    def __init__(
        self,
        objects: Objects,
        *,
        ttl: timedelta = DEFAULT_TTL,
        holder: str | None = None,
        key: str = LEASE_KEY,
        grace: timedelta = CLOCK_GRACE,
        where: str = "",
        clock: Callable[[], datetime] = _wall_clock,
    ):
        self.objects = objects
        self.clock = clock  # this machine's (`written_at`); expiry is the store's clock's
        self._store_clock: tuple[datetime, float] | None = None  # (store's time, monotonic)
        self.ttl = ttl
        self.grace = grace
        self.key = key
        self.where = where
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        # Who holds it, for a taker on the same machine to tell a dead holder (kill -9).
        self.machine = _this_machine()
        self.pid = os.getpid()
        self.started = process_started(self.pid)
        self.token = uuid.uuid4().hex
        self._etag: str | None = None
        self._renewed_mono = 0.0
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._renewing = threading.Lock()  # held across a renewal's PUT (`renew`)
        self._stop = threading.Event()
        self.stop_waiting: threading.Event | None = None  # set: `acquire` waits no more
        self._thread: threading.Thread | None = None
        self.run: tuple[str, int] | None = None  # (run id, started µs): `note_run`
        # The lease this one replaced while its holder had not released it (a killed writer):
        # its run, if it named one, is recorded killed (`LakeStore.recover`).
        self.taken_from: LeaseInfo | None = None
        # The runs of the replaced lease (`LeaseInfo.runs`), named in this one until it is
        # released: a second run killed before its first commit would lose the first's row,
        # which it had only in its local state.
        self.carried: list[tuple[str, int]] = []
        # Runs that ended without their record reaching the store, named until one does
        # (`LeaseInfo.unrecorded`): taken over from the lease this one replaced, and this
        # holder's own (`release`).
        self.unrecorded: list[Ended] = []

    # -- reading -------------------------------------------------------------------------

    def read(self) -> LeaseInfo | None:
        got = self.objects.get(self.key)
        if got is None:
            return None
        data, meta = got
        try:
            body = json.loads(data)
            pid = body.get("pid")
            return LeaseInfo(
                holder=str(body["holder"]),
                token=str(body["token"]),
                ttl=timedelta(seconds=float(body["ttl_s"])),
                released=bool(body.get("released", False)),
                etag=meta.etag,
                last_modified=meta.last_modified,
                machine=body.get("machine") or None,
                pid=int(pid) if pid is not None else None,
                started=body.get("started") or None,
                run_id=str(body["run_id"]) if body.get("run_id") else None,
                run_started_us=int(body["run_started_us"]) if body.get("run_started_us") else None,
                earlier=tuple((str(i), int(us)) for i, us in body.get("earlier") or ()),
                unrecorded=tuple(_ended(e) for e in body.get("unrecorded") or ()),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            # Unreadable lease (torn by hand?): treat it as expired once its mtime is old.
            return LeaseInfo("?", "?", self.ttl, False, meta.etag, meta.last_modified)

    def _body(self, released: bool = False) -> bytes:
        return json.dumps(
            {
                "holder": self.holder,
                "token": self.token,
                "ttl_s": self.ttl.total_seconds(),
                "released": released,
                "written_at": self.clock().isoformat(),
                "machine": self.machine,
                "pid": self.pid,
                "started": self.started,
                "run_id": self.run[0] if self.run else None,
                "run_started_us": self.run[1] if self.run else None,
                "earlier": self.carried,
                "unrecorded": [list(e) for e in self.unrecorded],
            }
        ).encode()

    def note_run(self, run_id: str, started_us: int) -> None:
        """Name the sync run that holds the lease, written at once (a renewal): a run killed
        before its first commit left no trace, its row was only in its local state."""
        self.run = (run_id, started_us)
        self.renew()

    # -- taking ----------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        return self._etag is not None and self._lost is None

    def try_acquire(self) -> bool:
        """One attempt: True if we now hold the lease."""
        current = self.read()
        started = time.monotonic()
        if current is not None and not (
            (current.token == self.token and not current.released)
            or current.released
            or current.holder_is_dead(self.machine)
            or current.is_free(self.store_now(), self.grace)
        ):
            return False
        kept = self.unrecorded, self.carried
        if current is not None and current.token != self.token:
            # Named in the very lease this one writes: a holder killed before its first
            # renewal must hand them on as well (a refused run's record was lost so).
            self.unrecorded = list(current.unrecorded)[-_CARRIED_AT_MOST:]
            if not current.released:
                self.carried = current.runs()[-_CARRIED_AT_MOST:]
        body = self._body()
        try:
            if current is None:
                etag = self.objects.put(self.key, body, if_none_match=True)
            else:
                etag = self.objects.put(self.key, body, if_match=current.etag)
        except PreconditionFailed:
            landed = self._landed(body)
            if landed is None:
                self.unrecorded, self.carried = kept
                return False
            etag = landed
        except BaseException:
            self.unrecorded, self.carried = kept
            raise
        with self._lock:
            self._etag = etag
            self._renewed_mono = started
            self._lost = None
        if current is not None and not current.released and current.token != self.token:
            self.taken_from = current
        return True

    def store_now(self) -> datetime:
        """The object store's clock now (never later than it): the Last-Modified of an object
        just written (`CLOCK_KEY`), learnt once, then advanced by the monotonic clock. Only a
        lease held by another costs these two requests."""
        if self._store_clock is None:
            self.objects.put(CLOCK_KEY, self.holder.encode())
            got = self.objects.get(CLOCK_KEY)
            if got is None:  # deleted by hand meanwhile: nothing learnt, the lease stands
                return datetime.min.replace(tzinfo=timezone.utc)
            self._store_clock = got[1].last_modified, time.monotonic()
        at, mono = self._store_clock
        return at + timedelta(seconds=time.monotonic() - mono)

    def _landed(self, body: bytes) -> str | None:
        """The lease's etag when the PUT of `body` refused with 412 had landed after all: the
        store applied it, its answer was lost (a 500), and the client's retry found it there.
        Only those very bytes (their `written_at` is this attempt's) are this write."""
        got = self.objects.get(self.key)
        if got is not None and got[0] == body:
            return got[1].etag
        return None

    def _put_over_our_own(self, body: bytes) -> str | None:
        """`body` written over the lease when it is still ours, unreleased: an earlier write of
        ours landed while its answer was lost (a renewal of the heartbeat, which goes on), so
        the etag we held is stale. None when another writer holds it."""
        current = self.read()
        if current is None or current.token != self.token or current.released:
            return None
        try:
            return self.objects.put(self.key, body, if_match=current.etag)
        except PreconditionFailed:
            return None

    def acquire(
        self, *, wait: bool = False, timeout: float | None = None, poll: float = 1.0
    ) -> None:
        """Take the lease or raise `LockHeldError` (with `wait`, poll until free or timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.try_acquire():
                return
            if not wait or (deadline is not None and time.monotonic() >= deadline):
                info = self.read()
                who = f" by {info.holder}" if info else ""
                until = (
                    f" until {info.expires_at(self.grace):%Y-%m-%dT%H:%M:%SZ} unless renewed"
                    if info
                    else ""
                )
                raise LockHeldError(
                    f"another opsaudit sync holds the dataset {self.where}{who} (lease{until}); "
                    "it exits by itself, or use --wait to queue behind it"
                )
            pause = min(poll, max(0.05, self.ttl.total_seconds() / 4))
            if (self.stop_waiting or threading.Event()).wait(pause):  # (a sync's Ctrl-C, SIGTERM)
                raise StoppedError.waiting(f"the lease on {self.where}")

    def renew(self) -> None:
        """Extend the lease (If-Match our etag); `LeaseLostError` if it was taken meanwhile.
        One renewal at a time: the heartbeat's and `note_run`'s, concurrent, sent the same etag
        and the loser's 412 read as the lease taken over by another writer."""
        with self._renewing:
            with self._lock:
                etag = self._etag
                if etag is None or self._lost:
                    raise self._lost_error()
            started = time.monotonic()
            body = self._body()
            new: str | None
            try:
                new = self.objects.put(self.key, body, if_match=etag)
            except PreconditionFailed:
                new = self._landed(body) or self._put_over_our_own(body)
            if new is None:
                with self._lock:
                    self._lost = "taken over by another writer"
                raise self._lost_error()
            with self._lock:
                self._etag = new
                self._renewed_mono = started

    def check(self, margin: timedelta | None = None) -> None:
        """Fence: raise `LeaseLostError` unless the lease is certainly still ours."""
        margin = margin if margin is not None else self.ttl / 4
        with self._lock:
            if self._etag is None or self._lost:
                raise self._lost_error()
            age = time.monotonic() - self._renewed_mono
        if age > (self.ttl - margin).total_seconds():
            with self._lock:
                self._lost = f"not renewed for {age:.0f}s (ttl {self.ttl.total_seconds():.0f}s)"
            raise self._lost_error()

    def _lost_error(self) -> LeaseLostError:
        reason = self._lost or "not held"
        said = f"the writer lease on {self.where} was lost ({reason}); stopping before any commit"
        error = LeaseLostError(said)
        error.reason = reason
        return error

    # -- heartbeat -------------------------------------------------------------------------

    def start_heartbeat(self, interval: float | None = None) -> None:
        """Renew every `interval` seconds (ttl/3 by default) in a daemon thread."""
        every = interval if interval is not None else self.ttl.total_seconds() / 3
        self._stop.clear()

        def run() -> None:
            while not self._stop.wait(every):
                try:
                    self.renew()
                except LeaseLostError:
                    return
                except Exception:  # a failed renewal request: retried next tick, fenced by check()
                    continue

        self._thread = threading.Thread(target=run, name="opsaudit-lease", daemon=True)
        self._thread.start()

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def release(self, unrecorded: Ended | None = None) -> None:
        """Give the lease up (If-Match our etag; a lease already taken over is left alone);
        `unrecorded`: this holder's run, ended, whose record the store refused."""
        self.stop_heartbeat()
        if unrecorded is not None:
            self.unrecorded = [*self.unrecorded, unrecorded][-_CARRIED_AT_MOST:]
        with self._lock:
            etag, self._etag = self._etag, None
        if etag is None:
            return
        body = self._body(released=True)
        try:
            self.objects.put(self.key, body, if_match=etag)
        except PreconditionFailed:  # one of ours whose answer was lost, or another's: left
            if self._landed(body) is None:
                self._put_over_our_own(body)

    def __enter__(self) -> Lease:
        self.acquire()
        self.start_heartbeat()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["DEFAULT_TTL", "LEASE_KEY", "Ended", "Lease", "LeaseInfo", "LeaseLostError"]
