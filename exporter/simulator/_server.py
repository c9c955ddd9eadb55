"""The HTTP/1.1 server: keep-alive, one write per response, faults, rate limits, counters."""

from __future__ import annotations

import contextlib
import random
import socket
import sys
import threading
import time
from collections import Counter
from email.utils import formatdate
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import orjson

from exporter.simulator._api import PREFIX, Api, ApiError, Reply, route_of
from exporter.simulator._config import Faults, RateLimits
from exporter.simulator._ratelimit import RateLimiter, retry_after_header
from exporter.simulator._world import World

_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    429: "Too Many Requests",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}
_HTML = (
    "<html>\r\n<head><title>{code} {reason}</title></head>\r\n<body>\r\n"
    "<center><h1>{code} {reason}</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
)


class Stats:
    """Request counters, readable as the JSON of GET /_sim/stats."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.requests = 0
        self.by_route: Counter[str] = Counter()
        self.by_status: Counter[str] = Counter()
        self.responses_429 = 0
        self.faults: Counter[str] = Counter({"5xx": 0, "drop": 0, "slow": 0, "truncate": 0})
        self.operations_served = 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {
                "requests": self.requests,
                "by_route": dict(self.by_route),
                "by_status": dict(self.by_status),
                "responses_429": self.responses_429,
                "faults": dict(self.faults),
                "operations_served": self.operations_served,
            }


class SimServer(ThreadingHTTPServer):
    """Threads per connection; holds the world, the API, faults, limits and counters."""

    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, address: tuple[str, int], world: World) -> None:
        self.world = world
        self.api = Api(world)
        self.stats = Stats()
        self.limiter = RateLimiter()
        self.rate_limits = RateLimits()
        self.faults = Faults()
        self.fault_rng = random.Random(self.faults.seed)
        self.fault_lock = threading.Lock()
        self.request_seq = 0
        # Scripted failures: [path suffix, status, answers left (None: all), matches to pass]
        self.scripted: list[list[Any]] = []
        # Scripted failures echo the request's Authorization header in their message, as a
        # careless proxy or debug page would (issue 9, finding 9: the exporter must redact).
        self.echo_auth = False
        self.connections: set[socket.socket] = set()
        self.conn_lock = threading.Lock()
        super().__init__(address, _Handler)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Clients drop connections (and so do our own faults): not worth a traceback.
        if not isinstance(sys.exc_info()[1], OSError):
            super().handle_error(request, client_address)

    def set_faults(self, faults: Faults) -> None:
        with self.fault_lock:
            self.faults = faults
            self.fault_rng = random.Random(faults.seed)

    def draw_faults(self) -> tuple[bool, int | None, bool, bool]:
        """(drop, 5xx code or None, slow, truncate): four draws per request, reproducible."""
        with self.fault_lock:
            f, r = self.faults, self.fault_rng
            u = (r.random(), r.random(), r.random(), r.random())
        code = (502, 503, 504)[min(2, int(u[1] / f.p_5xx * 3))] if u[1] < f.p_5xx else None
        return u[0] < f.p_drop, code, u[2] < f.p_slow, u[3] < f.p_truncate

    def take_scripted(self, path: str, query: str = "") -> tuple[int, int | None] | None:
        """The status (and Retry-After seconds, or None) a scripted failure answers this path
        with, or None (see fail_requests)."""
        with self.fault_lock:
            for entry in self.scripted:
                suffix, status, left, skip, retry_after = entry
                ending, _, wanted = suffix.partition("?")
                if not path.endswith(ending) or wanted not in query or left == 0:
                    continue
                if skip > 0:
                    entry[3] -= 1
                    return None
                if left is not None:
                    entry[2] -= 1
                return int(status), retry_after
        return None

    def next_request_id(self) -> str:
        with self.fault_lock:
            self.request_seq += 1
            n = self.request_seq
        return f"00000000-0000-4000-8000-{n:012x}"

    def close_connections(self) -> None:
        with self.conn_lock:
            conns = list(self.connections)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    """One connection; requests are answered in order over keep-alive."""

    protocol_version = "HTTP/1.1"
    server: SimServer
    disable_nagle_algorithm = True

    def setup(self) -> None:
        super().setup()
        with self.server.conn_lock:
            self.server.connections.add(self.connection)

    def finish(self) -> None:
        with self.server.conn_lock:
            self.server.connections.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # silent: tests and benchmarks make thousands of requests

    def _send(
        self,
        status: int,
        body: bytes,
        request_id: str,
        content_type: str = "application/json",
        extra: list[tuple[str, str]] | None = None,
        truncate: bool = False,
    ) -> None:
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Error')}",
            f"Content-Type: {content_type}",
            f"Content-Length: {len(body)}",
            f"X-Neon-Ret-Request-Id: {request_id}",
            # Wall time, as a real server's (the operations' times are the virtual clock's).
            "Date: " + formatdate(time.time() + self.server.faults.clock_skew_seconds, usegmt=True),
        ]
        for name, value in extra or ():
            head.append(f"{name}: {value}")
        if truncate or self.close_connection:
            head.append("Connection: close")
        data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        if truncate:
            # Headers promise the full length; the body stops half-way and the socket closes.
            data = data[: len(data) - max(1, len(body) // 2)]
            self.close_connection = True
        trickle = self.server.faults.trickle_seconds
        try:
            if trickle > 0:
                self.wfile.write(data[: len(data) - len(body)])
                for i in range(len(body)):
                    time.sleep(trickle)
                    self.wfile.write(body[i : i + 1])
            else:
                self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def _error(self, status: int, message: str, request_id: str, extra: Any = None) -> None:
        body = orjson.dumps({"code": "", "message": message, "request_id": request_id})
        self._send(status, body, request_id, extra=extra)

    def do_GET(self) -> None:
        path, _, query = self.path.partition("?")
        if path.startswith("/_sim/"):
            self._sim_route("GET", path)
            return
        srv = self.server
        route = route_of(path)
        stats = srv.stats
        drop, err5xx, slow, truncate = srv.draw_faults()
        with stats.lock:
            stats.requests += 1
            stats.by_route[route] += 1
            if drop:
                stats.faults["drop"] += 1
            elif err5xx is not None:
                stats.faults["5xx"] += 1
        request_id = srv.next_request_id()
        if drop:
            self.close_connection = True
            return
        if err5xx is not None:
            code = err5xx
            html = _HTML.format(code=code, reason=_REASONS[code]).encode()
            self._count_status(code)
            self._send(code, html, request_id, content_type="text/html")
            return
        scripted = srv.take_scripted(path, query)
        if scripted is not None:
            status, retry_after = scripted
            self._count_status(status)
            message = f"scripted failure {status}"
            if srv.echo_auth:
                message += f" (request had Authorization: {self.headers.get('Authorization')})"
            extra = None if retry_after is None else [("Retry-After", str(retry_after))]
            self._error(status, message, request_id, extra)
            return
        reply, error = self._answer(path, query, route)
        if slow:
            with stats.lock:
                stats.faults["slow"] += 1
            time.sleep(srv.faults.slow_seconds)
        if error is not None:
            status, message, extra = error
            self._count_status(status)
            self._error(status, message, request_id, extra)
            return
        assert reply is not None
        if truncate:
            with stats.lock:
                stats.faults["truncate"] += 1
        self._count_status(200)
        self._send(200, reply.body, request_id, truncate=truncate)

    def _answer(
        self, path: str, query: str, route: str
    ) -> tuple[Reply | None, tuple[int, str, Any] | None]:
        srv = self.server
        auth = self.headers.get("Authorization", "")
        scheme, _, token = auth.partition(" ")
        if not auth:
            return None, (401, "authorization header is missing", None)
        with srv.world.lock:
            key = srv.world.keys.get(token.strip()) if scheme.lower() == "bearer" else None
            if key is not None and token.strip() in srv.world.revoked:
                key = None
        if key is None:
            return None, (401, "authentication failed: invalid or revoked API key", None)
        if not path.startswith(PREFIX) or route == "unknown":
            return None, (404, f"no route for GET {path}", None)
        limits = srv.rate_limits
        wait = srv.limiter.admit(limits, route)
        if wait is not None:
            with srv.stats.lock:
                srv.stats.responses_429 += 1
            header = retry_after_header(wait, limits.time_scale)
            extra = [("Retry-After", header)] if limits.retry_after else None
            return None, (429, "rate limit exceeded, retry later", extra)
        try:
            return srv.api.handle(path, query, key, route), None
        except ApiError as exc:
            return None, (exc.status, exc.message, None)

    def _count_status(self, status: int) -> None:
        with self.server.stats.lock:
            self.server.stats.by_status[str(status)] += 1

    def _sim_route(self, method: str, path: str, body: bytes = b"") -> None:
        srv = self.server
        request_id = srv.next_request_id()
        if method == "POST" and path == "/_sim/rate-limits":
            # Benchmarks in another process switch the limits on after their set-up.
            srv.rate_limits = RateLimits(**orjson.loads(body or b"{}"))
            srv.limiter.reset()
            self._send(200, b'{"rate_limits":true}', request_id)
            return
        if method == "GET" and path == "/_sim/stats":
            self._send(200, orjson.dumps(srv.stats.snapshot()), request_id)
        elif method == "POST" and path == "/_sim/reset":
            with srv.stats.lock:
                srv.stats.reset()
            self._send(200, b'{"reset":true}', request_id)
        else:
            self._error(404, f"no simulator route {method} {path}", request_id)

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        path = self.path.partition("?")[0]
        if path.startswith("/_sim/"):
            self._sim_route("POST", path, body)
            return
        self._error(405, "the simulator serves read-only routes", self.server.next_request_id())

    do_PUT = do_PATCH = do_DELETE = do_POST
