"""One writer per dataset: a lease object taken and renewed with conditional writes.

The lease is `_opsaudit/lease.json` under the dataset root:
`{"holder": "host:pid", "token": "<uuid>", "ttl_s": 120, "released": false, ...}`.

- take: create it with If-None-Match: * ; if it exists and is released or expired, replace it
  with If-Match: <the etag we read> (so of two takers exactly one wins);
- renew: rewrite it with If-Match: <our last etag> every ttl/3 (a background thread); a failed
  renewal means someone took it: the holder is fenced (`check()` raises `LeaseLostError`);
- release: rewrite it as released with If-Match (no unconditional delete, so a release can never
  remove a lease that someone else has taken meanwhile).

Expiry is judged on the *server's* Last-Modified of the lease object plus its ttl plus a grace
for clock skew, compared with the taker's clock: a dead holder stops renewing and loses the lease
after ttl + grace whatever its own clock said. The holder fences itself by its monotonic clock:
past ttl - margin since its last successful renewal, `check()` fails, before any commit.

The lease is a courtesy that keeps a second cron run from doing useless work; exactness does
not rest on it: every table commit carries `txn(dataset_id, N)` and Delta refuses a second commit
of the same transaction version (see `_tables.py`).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone

from exporter._errors import LockHeldError
from exporter.lake._objects import Objects, PreconditionFailed

LEASE_KEY = "_opsaudit/lease.json"
DEFAULT_TTL = timedelta(seconds=120)
CLOCK_GRACE = timedelta(seconds=5)


class LeaseLostError(LockHeldError):
    """Our lease expired or was taken over: stop writing (exit code of a held lock)."""


@dataclass(frozen=True)
class LeaseInfo:
    holder: str
    token: str
    ttl: timedelta
    released: bool
    etag: str
    last_modified: datetime

    def expires_at(self, grace: timedelta = CLOCK_GRACE) -> datetime:
        return self.last_modified + self.ttl + grace

    def is_free(self, now: datetime, grace: timedelta = CLOCK_GRACE) -> bool:
        return self.released or now >= self.expires_at(grace)


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
    ):
        self.objects = objects
        self.ttl = ttl
        self.grace = grace
        self.key = key
        self.where = where
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}"
        self.token = uuid.uuid4().hex
        self._etag: str | None = None
        self._renewed_mono = 0.0
        self._lost: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- reading -------------------------------------------------------------------------

    def read(self) -> LeaseInfo | None:
        got = self.objects.get(self.key)
        if got is None:
            return None
        data, meta = got
        try:
            body = json.loads(data)
            return LeaseInfo(
                holder=str(body["holder"]),
                token=str(body["token"]),
                ttl=timedelta(seconds=float(body["ttl_s"])),
                released=bool(body.get("released", False)),
                etag=meta.etag,
                last_modified=meta.last_modified,
            )
        except (ValueError, KeyError, TypeError):
            # Unreadable lease (torn by hand?): treat it as expired once its mtime is old.
            return LeaseInfo("?", "?", self.ttl, False, meta.etag, meta.last_modified)

    def _body(self, released: bool = False) -> bytes:
        return json.dumps(
            {
                "holder": self.holder,
                "token": self.token,
                "ttl_s": self.ttl.total_seconds(),
                "released": released,
                "written_at": datetime.now(timezone.utc).isoformat(),
            }
        ).encode()

    # -- taking ----------------------------------------------------------------------------

    @property
    def held(self) -> bool:
        return self._etag is not None and self._lost is None

    def try_acquire(self) -> bool:
        """One attempt: True if we now hold the lease."""
        current = self.read()
        started = time.monotonic()
        try:
            if current is None:
                etag = self.objects.put(self.key, self._body(), if_none_match=True)
            elif (current.token == self.token and not current.released) or current.is_free(
                datetime.now(timezone.utc), self.grace
            ):
                etag = self.objects.put(self.key, self._body(), if_match=current.etag)
            else:
                return False
        except PreconditionFailed:
            return False
        with self._lock:
            self._etag = etag
            self._renewed_mono = started
            self._lost = None
        return True

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
            time.sleep(min(poll, max(0.05, self.ttl.total_seconds() / 4)))

    def renew(self) -> None:
        """Extend the lease (If-Match our etag); `LeaseLostError` if it was taken meanwhile."""
        with self._lock:
            etag = self._etag
            if etag is None or self._lost:
                raise LeaseLostError(self._lost_message())
        started = time.monotonic()
        try:
            new = self.objects.put(self.key, self._body(), if_match=etag)
        except PreconditionFailed:
            with self._lock:
                self._lost = "taken over by another writer"
            raise LeaseLostError(self._lost_message()) from None
        with self._lock:
            self._etag = new
            self._renewed_mono = started

    def check(self, margin: timedelta | None = None) -> None:
        """Fence: raise `LeaseLostError` unless the lease is certainly still ours."""
        margin = margin if margin is not None else self.ttl / 4
        with self._lock:
            if self._etag is None or self._lost:
                raise LeaseLostError(self._lost_message())
            age = time.monotonic() - self._renewed_mono
        if age > (self.ttl - margin).total_seconds():
            with self._lock:
                self._lost = f"not renewed for {age:.0f}s (ttl {self.ttl.total_seconds():.0f}s)"
            raise LeaseLostError(self._lost_message())

    def _lost_message(self) -> str:
        reason = self._lost or "not held"
        return f"the writer lease on {self.where} was lost ({reason}); stopping before any commit"

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

    def release(self) -> None:
        """Give the lease up (If-Match our etag; a lease already taken over is left alone)."""
        self.stop_heartbeat()
        with self._lock:
            etag, self._etag = self._etag, None
        if etag is None:
            return
        with contextlib.suppress(PreconditionFailed):
            self.objects.put(self.key, self._body(released=True), if_match=etag)

    def __enter__(self) -> Lease:
        self.acquire()
        self.start_heartbeat()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


__all__ = ["DEFAULT_TTL", "LEASE_KEY", "Lease", "LeaseInfo", "LeaseLostError"]
