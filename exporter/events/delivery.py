"""Delivery of the outbox's events after the commit (issue 22): the events file and the webhook.

The events file holds each event exactly once, across kill -9 at any instant. Events are
appended in commit order, fsynced, then marked delivered. A kill can leave two traces, both
mended by the next run before it appends anything: a torn last line (cut at the last newline;
its event is still pending and is appended again whole), and appended lines whose marks were
never committed (the file's last line names a pending event: it and every pending event before
it are in the file, because appends are in commit order, so they are marked, not repeated).
Each append, and the repair before it, holds the file's lock (`events.eventsfile`): runs of
another data directory appending to the same file wait for it, and it for theirs.

The webhook gets each event at least once (Standard Webhooks: `webhook-id` = the event id on
every attempt, a fresh `webhook-timestamp` and signature per attempt). Events go out in commit
order on a few lanes, all of an operation's events on one lane, so one operation's versions
arrive in order. A non-2xx answer, a timeout (of the whole attempt) or a refused connection is
retried with doubling waits; an event that still fails stops the webhook for this run (the
receiver is down or refusing: the rest would fail the same way), and it and everything after it
wait in the outbox for the next run. The URL's query string and userinfo (a token's place) and
the secret never reach a log line or a message.
"""

from __future__ import annotations

import base64
import http.client
import logging
import os
import ssl
import threading
import time
import urllib.parse
import zlib
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import wait as futures_wait
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from exporter.core.layout import appended_whole, write_all
from exporter.core.watchdog import Watchdog
from exporter.events.eventsfile import locked
from exporter.events.outbox import EventsConfig, Outbox
from exporter.events.webhook import connect_within, safe_url, sign
from exporter.store.base import VersionsReader

__all__ = ["Delivery", "deliver", "deliver_file"]

log = logging.getLogger("opsaudit.events")

_FILE_BATCH = 5000
_WEBHOOK_BATCH = 2000
_SAVE_ACKS_EVERY = 0.5  # seconds
_MAX_BACKOFF = 30.0
_ANSWER_BYTES = 65536  # of a receiver's answer's body, read (and ignored) at most


@dataclass
class Delivery:
    """What one run's delivery did."""

    delivered: dict[str, int] = field(default_factory=dict)  # sink -> events delivered now
    pending: int = 0  # events still waiting for a sink after the run
    waiting: dict[str, int] = field(default_factory=dict)  # sink -> of them, those it waits for
    errors: list[str] = field(default_factory=list)  # why a sink stopped (safe to print)


def deliver(
    state: object,
    config: EventsConfig,
    rows: VersionsReader | None = None,
    stop: threading.Event | None = None,
    deadline: float | None = None,
) -> Delivery:
    """Deliver what waits in the outbox to the run's sinks; never raises for a sink that
    fails (the events wait), only when the state cannot be written or the committed rows
    read (`StorageError`). `rows`: the store's `versions_reader()`; `stop`, once set, ends
    the webhook at its next attempt (an aborted run: the rest waits); past `deadline`
    (time.monotonic(): a run's --time-budget) the webhook starts no attempt (the rest waits)."""
    outbox = Outbox(state, config, rows)
    out = Delivery()
    if config.file is not None:
        try:
            out.delivered["file"] = deliver_file(outbox, config.file)
        except OSError as exc:
            out.delivered["file"] = exc.delivered if isinstance(exc, FileAppendError) else 0
            message = (
                f"events file {config.file}: {exc.strerror or exc}; the events wait in the "
                "outbox for the next run that can append to it (a file, in a directory that "
                "exists, this user may write)"
            )
            log.warning("%s", message)
            out.errors.append(message)
    if config.webhook_url and config.webhook_key:
        sender = _Webhook(config, stop, deadline)
        try:
            out.delivered["webhook"], error = sender.deliver(outbox)
        finally:
            sender.close()
        if error:
            out.errors.append(error)
    backlog = outbox.backlog()
    out.pending = backlog.total
    out.waiting = {sink: n for sink, n in backlog.pending.items() if n}
    return out


# -- the events file ----------------------------------------------------------------------------


def _last_event_id(line: bytes | None) -> str | None:
    if not line:
        return None
    try:
        value = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    event_id = value.get("id") if isinstance(value, dict) else None
    return event_id if isinstance(event_id, str) else None


class FileAppendError(OSError):
    """The events file refused an append (a full disk): nothing of it stays in the file;
    `delivered` events were appended, and recorded, before it."""

    def __init__(self, cause: OSError, delivered: int) -> None:
        super().__init__(cause.errno, cause.strerror)
        self.delivered = delivered


def deliver_file(outbox: Outbox, path: Path) -> int:
    """Append the events waiting for the file, each batch under the file's lock (`locked`:
    another data directory's runs may append to it too); returns how many were marked."""
    with locked(path) as (_, last_line):
        last_id = _last_event_id(last_line)
        if last_id is not None:
            seq, index = outbox.find_pending_file(last_id)
            if seq is not None:
                # Appended by a run killed before it recorded that: in the file already.
                n = outbox.delivered_through("file", seq, 0, index + 1)
                log.info("events file: %d event(s) found appended by an interrupted run", n)
    delivered = 0
    after = 0
    while batches := outbox.pending("file", after, _FILE_BATCH):
        data = b"".join(b.file_data() for b in batches)  # built before the lock is taken
        try:
            # A full disk: nothing of it, not half a line.
            with locked(path) as (fd, _), appended_whole(fd):
                write_all(fd, data)
                os.fsync(fd)
        except OSError as exc:
            raise FileAppendError(exc, delivered) from exc
        delivered += outbox.delivered_through("file", batches[-1].seq, after)
        after = batches[-1].seq
    return delivered


# -- the webhook --------------------------------------------------------------------------------


class _Webhook:
    """POSTs events to the webhook with retries; the first event that exhausts them stops it
    (`stop`, which its caller may set too)."""

    def __init__(
        self,
        config: EventsConfig,
        stop: threading.Event | None = None,
        deadline: float | None = None,
    ):
        assert config.webhook_url and config.webhook_key
        self.shown = safe_url(config.webhook_url)
        self.key = config.webhook_key
        self.config = config
        self.lanes = max(1, config.webhook_lanes)
        # http.client, one keep-alive connection per lane: a POST costs a fifth of httpx's CPU
        # (bench/README.md), and a webhook needs nothing more (no redirects, no pool, no proxy).
        parts = urllib.parse.urlsplit(config.webhook_url)
        self._https = parts.scheme == "https"
        # The scheme's port when the URL names none: http.client, given None, takes a bare
        # IPv6 literal's last group for a port ("::1" would be host ":" port 1).
        default = http.client.HTTPS_PORT if self._https else http.client.HTTP_PORT
        self._host, self._port = parts.hostname or "", parts.port or default
        self._target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        self._headers = {"content-type": "application/json", "user-agent": "opsaudit"}
        if parts.username is not None:
            user = urllib.parse.unquote(parts.username)
            password = urllib.parse.unquote(parts.password or "")
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            self._headers["authorization"] = f"Basic {token}"
        self._local = threading.local()
        self._connections: list[http.client.HTTPConnection] = []
        self.stop = stop if stop is not None else threading.Event()
        self.deadline = deadline  # time.monotonic(): no attempt starts after it
        self.error: str | None = None
        self._error_lock = threading.Lock()
        # The stop (an event that exhausted its retries, the run's Ctrl-C) cuts POSTs in flight.
        self._watchdog = Watchdog(config.webhook_timeout, self.stop)

    def close(self) -> None:
        self._watchdog.close()
        for connection in self._connections:
            connection.close()

    def _connection(self) -> http.client.HTTPConnection:
        connection: http.client.HTTPConnection | None = getattr(self._local, "connection", None)
        if connection is None:
            timeout = self.config.webhook_timeout
            if self._https:
                connection = http.client.HTTPSConnection(
                    self._host, self._port, timeout=timeout, context=ssl.create_default_context()
                )
            else:
                connection = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
            connection._create_connection = connect_within  # type: ignore[attr-defined]
            self._local.connection = connection
            with self._error_lock:
                self._connections.append(connection)
        return connection

    def deliver(self, outbox: Outbox) -> tuple[int, str | None]:
        delivered = 0
        after = 0
        with ThreadPoolExecutor(self.lanes, thread_name_prefix="opsaudit-webhook") as pool:
            while not self.stop.is_set() and not self._late():
                batches = outbox.pending("webhook", after, _WEBHOOK_BATCH)
                if not batches:
                    break
                lanes: list[list[tuple[bytearray, int, str, bytes]]] = [
                    [] for _ in range(self.lanes)
                ]
                for b in batches:
                    assert b.acked is not None
                    for i, (event_id, body) in enumerate(zip(b.ids, b.lines)):
                        if not b.acked[i]:
                            lane = zlib.crc32(event_id.rpartition(":")[0].encode()) % self.lanes
                            lanes[lane].append((b.acked, i, event_id, body))
                futures = [pool.submit(self._lane, lane) for lane in lanes]
                # The acknowledgements are saved as they come, not only once the window is
                # through: a run killed meanwhile resends what the last second took, not the
                # whole window (still at least once).
                try:
                    while not futures_wait(futures, _SAVE_ACKS_EVERY).done.issuperset(futures):
                        delivered += outbox.delivered("webhook", batches)
                except BaseException:
                    self.stop.set()  # a state that cannot be written: the lanes stop, not send on
                    raise
                for f in futures:
                    f.result()
                delivered += outbox.delivered("webhook", batches)
                after = batches[-1].seq
        if self._late() and self.error is None and not self.stop.is_set():
            log.info("webhook %s: the run's --time-budget is spent; the rest waits", self.shown)
        return delivered, self.error

    def _lane(self, events: list[tuple[bytearray, int, str, bytes]]) -> None:
        for acked, i, event_id, body in events:
            if self.stop.is_set() or self._late() or not self._send(event_id, body):
                break  # later events of this lane's operations must not overtake this one
            acked[i] = 1

    def _send(self, event_id: str, body: bytes) -> bool:
        attempts = max(1, self.config.webhook_attempts)
        for attempt in range(attempts):
            if attempt and self._late():
                return False  # the run's time is up: it waits, no error
            problem = self._attempt(event_id, body)
            if problem is None:
                return True
            if attempt + 1 < attempts:
                wait = min(_MAX_BACKOFF, self.config.webhook_backoff * 2**attempt)
                log.debug(
                    "webhook %s: %s for %s, retry in %.1fs", self.shown, problem, event_id, wait
                )
                if self.stop.wait(self._within_deadline(wait)):
                    return False
        with self._error_lock:
            if self.error is None:
                self.error = (
                    f"webhook {self.shown}: {problem} after {attempts} attempt(s); the events "
                    "wait in the outbox for the next run"
                )
                log.warning("%s", self.error)
        self.stop.set()
        return False

    def _within_deadline(self, wait: float) -> float:
        """A retry's wait, cut at the deadline (it ran 8 s past the budget's end: the run
        slept to find its time up)."""
        if self.deadline is None:
            return wait
        return max(0.0, min(wait, self.deadline - time.monotonic()))

    def _late(self) -> bool:
        """Past the run's --time-budget (a backlog at a slow receiver held a run of 4 minutes'
        budget for an hour: the next cron runs found the lock held)."""
        return self.deadline is not None and time.monotonic() >= self.deadline

    def _attempt(self, event_id: str, body: bytes) -> str | None:
        """One POST within the timeout: None when the receiver took it (2xx), else why not."""
        timestamp = int(time.time())
        headers = {
            **self._headers,
            "webhook-id": event_id,
            "webhook-timestamp": str(timestamp),
            "webhook-signature": sign(self.key, event_id, timestamp, body),
        }
        # Any failure to send fails the attempt, never the run: the network's, the protocol's,
        # and a URL the library got unvalidated that cannot be encoded (UnicodeError).
        connection: http.client.HTTPConnection | None = None
        try:
            with self._watchdog.watch() as watch:
                connection = self._connection()
                if connection.sock is None:
                    connection.connect()  # bounded by the socket's timeout
                watch.sock = connection.sock
                if watch.fired:  # while connecting: the watchdog had no socket to shut
                    raise TimeoutError
                connection.request("POST", self._target, body=body, headers=headers)
                response = connection.getresponse()
                # Bounded: a receiver's large answer (a download, a stream) held a lane's
                # whole body in memory; what is left unread is dropped with the connection.
                response.read(_ANSWER_BYTES)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            if connection is not None:
                connection.close()
            if isinstance(exc, TimeoutError) or watch.fired:
                return f"no answer within {self.config.webhook_timeout:g}s"
            # Named by type only: the text of some could carry the URL (refused, reset...).
            return type(exc).__name__
        if response.will_close or watch.fired or not response.isclosed():
            connection.close()  # the next request opens a new one
        if 300 <= response.status < 400:
            # Not followed (a POST's redirect is the receiver's set-up, its Location may carry
            # a token): an http:// URL its server sends on to https:// failed each run, and
            # "HTTP 301" did not say what to change.
            return f"HTTP {response.status}, a redirect (not followed: give --webhook its target)"
        return None if 200 <= response.status < 300 else f"HTTP {response.status}"
