"""A webhook receiver of the tests' own on loopback (it answers, fails, hangs or drops on demand)
and the Standard Webhooks check, written from the specification, not from opsaudit's code."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import random
import signal
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import duckdb
import orjson
import pytest

SECRET = "whsec_" + base64.b64encode(b"opsaudit-test-signing-key-32byte").decode()


def verify(secret: str, headers: dict[str, str], body: bytes) -> bool:
    """Standard Webhooks: v1 = base64(HMAC-SHA256(base64-decoded secret after whsec_,
    "<webhook-id>.<webhook-timestamp>.<body>")), among the space-separated signatures."""
    key = base64.b64decode(secret.split("_", 1)[1])
    signed = headers["webhook-id"].encode() + b"." + headers["webhook-timestamp"].encode()
    expected = base64.b64encode(hmac.new(key, signed + b"." + body, hashlib.sha256).digest())
    return any(
        version == "v1" and hmac.compare_digest(sig.encode(), expected)
        for version, _, sig in (s.partition(",") for s in headers["webhook-signature"].split())
    )


@dataclass
class Received:
    id: str
    timestamp: int
    body: bytes
    valid: bool


@dataclass
class Receiver:
    """Answers 2xx (`ok`), 500 (`fail`), 301 (`redirect`), nothing for `hang_seconds` (`hang`)
    or closes the connection unanswered (`drop`); `weights` picks one of them at random per
    request."""

    mode: str = "ok"
    weights: dict[str, float] | None = None
    hang_seconds: float = 1.0
    fail_first: int = 0  # answer 500 to the first N attempts of every event id
    hang_at: int | None = None  # the n-th attempt (counting all) hangs, once
    slow_seconds: float = 0.0  # every answer given this late (a slow, healthy receiver)
    seed: int = 7
    received: list[Received] = field(default_factory=list)  # answered 2xx, in order
    attempts: list[str] = field(default_factory=list)  # every request's webhook-id
    bad_requests: list[str] = field(default_factory=list)
    # (n, pid): SIGKILL process `pid` when the n-th attempt (counting all) arrives, which then
    # goes unanswered: a kill while the webhook is delivering, at a chosen instant.
    kill_at: tuple[int, int] | None = None
    killed_in_flight: list[str] = field(default_factory=list)  # the event ids of those attempts
    server: Any = None

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
        self.lock = threading.Lock()
        self.url = ""

    def behaviour(self, event_id: str) -> str:
        with self.lock:
            self.attempts.append(event_id)
            if self.kill_at is not None and len(self.attempts) >= self.kill_at[0]:
                os.kill(self.kill_at[1], signal.SIGKILL)
                self.kill_at = None
                self.killed_in_flight.append(event_id)
                return "drop"
            if self.hang_at is not None and len(self.attempts) == self.hang_at:
                return "hang"
            if self.fail_first and self.attempts.count(event_id) <= self.fail_first:
                return "fail"
            if self.weights:
                names = list(self.weights)
                return self.rng.choices(names, [self.weights[n] for n in names])[0]
            return self.mode

    def ids(self) -> set[str]:
        return {r.id for r in self.received}


@contextlib.contextmanager
def start_receiver() -> Iterator[Receiver]:
    """A `Receiver` listening on loopback until the block ends (the lake tests use it too)."""
    state = Receiver()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            body = self.rfile.read(length)
            if len(body) < length:
                # The sender died mid-request (kill -9): an HTTP server hands no such request
                # to the application; it is no attempt that arrived.
                self.close_connection = True
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            event_id = headers.get("webhook-id", "")
            what = state.behaviour(event_id)
            if what == "drop":
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)
                return
            if what == "hang":
                time.sleep(state.hang_seconds)
                self.close_connection = True
                return
            if what == "redirect":  # (to where a token is)
                self.send_response(301)
                self.send_header("location", "https://elsewhere.example/hook?token=moved-s3cr3t")
                self.send_header("content-length", "0")
                self.end_headers()
                return
            if what == "fail":
                self.send_response(500)
                self.send_header("content-length", "0")
                self.end_headers()
                return
            try:
                valid = verify(SECRET, headers, body)
                timestamp = int(headers["webhook-timestamp"])
                event = orjson.loads(body)
                assert event["id"] == event_id
            except (KeyError, ValueError, AssertionError):
                with state.lock:
                    state.bad_requests.append(event_id)
                valid, timestamp = False, 0
            with state.lock:
                state.received.append(Received(event_id, timestamp, body, valid))
            time.sleep(state.slow_seconds)
            self.send_response(204)
            self.send_header("content-length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    state.server = server
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/opsaudit?token=s3cr3t-query"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    with start_receiver() as state:
        yield state


def closed_port_url() -> str:
    """A loopback URL where nothing listens: every attempt is a refused connection."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/hooks?token=s3cr3t-query"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "webhook.secret"
    path.write_text(SECRET + "\n")
    return path


def file_events(path: Path) -> list[dict[str, Any]]:
    """Every line of the events file, parsed (a line that is not JSON fails the test)."""
    if not path.exists():
        return []
    text = path.read_bytes()
    assert not text or text.endswith(b"\n"), "the events file ends in a torn line"
    return [orjson.loads(line) for line in text.splitlines()]


def versions_after(data_dir: Path, first_run_ids: set[str]) -> dict[str, dict[str, Any]]:
    """Event id -> row, for every operation_versions row not written by the given runs."""
    from exporter.store.local.reader import committed_files

    files = [str(data_dir / f) for f in committed_files(data_dir) or []]
    if not files:
        return {}
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    rel = con.execute(
        "SELECT * EXCLUDE (created_month) FROM read_parquet(?, hive_partitioning = true)",
        [files],
    )
    cols = [d[0] for d in rel.description]
    rows = [dict(zip(cols, r)) for r in rel.fetchall()]
    return {f"{r['id']}:{r['version']}": r for r in rows if r["run_id"] not in first_run_ids}


def run_ids(data_dir: Path) -> list[str]:
    import sqlite3

    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return [r[0] for r in con.execute("SELECT run_id FROM runs ORDER BY started_us")]
    finally:
        con.close()


ROOT = Path(__file__).resolve().parents[2]


def sync_events(
    sim: Any, data_dir: Path, sync_fields: dict[str, Any] | None = None, **events: Any
) -> Any:
    """One sync against the simulator, unpaced, with fast retries and a commit every 0.2 s
    (`commit_seconds` among `events` for another; `sync_fields`: other SyncConfig fields), to
    the sinks of `EventsConfig(**events)`."""
    from exporter.api.client import RetryPolicy
    from exporter.engine.sync import SyncConfig, sync
    from exporter.events.config import EventsConfig

    events.setdefault("webhook_backoff", 0.01)
    commit_seconds = events.pop("commit_seconds", 0.2)
    config = SyncConfig(
        data_dir=data_dir,
        api_key=sim.personal_key,
        base_url=sim.base_url,
        max_rps=None,
        retry=RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05),
        commit_seconds=commit_seconds,
        events=EventsConfig(**events),
        **(sync_fields or {}),
    )
    return sync(config)


def child_env(sim: Any, data: Path, events_file: Path, **more: str) -> dict[str, str]:
    """The environment of a sync run by a child process of this checkout, to the events file."""
    return {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(data),
        "OPSAUDIT_EVENTS_FILE": str(events_file),
        "PYTHONPATH": str(ROOT),
        **more,
    }
