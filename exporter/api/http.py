"""The API client's HTTP/1.1 transport: keep-alive `http.client` connections, one per request
in flight, with httpx's timeouts, headers, decoding and error classes (issue 24, client CPU).

A 1000-operation page cost 0.65-0.84 ms of CPU through httpx and 0.19-0.20 ms through
`http.client` on the same connection (bench/README.md), and importing httpx ~50 ms a run; the
client needs none of what the difference buys (no HTTP/2, redirects, proxies, cookies or auth
flows: the API is one host, `trust_env` was off). What it keeps, as httpx did it:

- timeouts per phase: connect, write (sending the request), read (each wait for bytes), pool
  (waiting for a free connection when `max_connections` are busy);
- beyond httpx: a bound on the whole attempt, connect to last byte (an answer trickled a byte a
  second never waits `read` for one), and every attempt cut at once when the run is stopped
  (`core.watchdog`);
- an idle connection the server closed (or that has bytes nobody asked for) is dropped before
  reuse, never sent on (httpcore's readability check); a response with `Connection: close`
  closes it;
- `Accept-Encoding: gzip, deflate` sent and the body decoded;
- HTTPS verified against certifi's bundle (httpx's default);
- failures raised as the httpx classes the client classifies, by the same names (the retry
  messages say `timed out (ReadTimeout)`, `connection failed (RemoteProtocolError)`).

Nothing here sees the key except as a header value: no message carries headers.
"""

from __future__ import annotations

import http.client
import select
import socket
import threading
import zlib
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

from exporter.core.watchdog import Watch, Watchdog


@dataclass(frozen=True)
class Timeout:
    """Seconds allowed per phase of a request (httpx.Timeout's four)."""

    connect: float = 10.0
    read: float = 60.0
    write: float = 10.0
    pool: float = 120.0
    attempt: float = 120.0  # the whole attempt, connect to last byte (not httpx's)


class TransportError(Exception):
    """No HTTP response: the request may or may not have reached the server."""


class TimeoutException(TransportError):
    pass


class ConnectTimeout(TimeoutException):
    pass


class ReadTimeout(TimeoutException):
    pass


class WriteTimeout(TimeoutException):
    pass


class PoolTimeout(TimeoutException):
    pass


class Cut(TransportError):
    """The run cut the attempt short (it was stopped, or its time budget ended): no failure of
    the server's, nor a reason to retry."""


class ConnectError(TransportError):
    """No connection could be made (refused, no such host, TLS handshake refused)."""


class ReadError(TransportError):
    pass


class WriteError(TransportError):
    pass


class RemoteProtocolError(TransportError):
    """The server broke HTTP: closed without an answer, cut the body short, sent garbage."""


@dataclass(frozen=True)
class Response:
    status_code: int
    reason_phrase: str
    headers: Message  # case-insensitive `get`
    content: bytes


def _decoded(body: bytes, encoding: str | None) -> bytes:
    if not encoding or not body:
        return body
    encoding = encoding.strip().lower()
    try:
        if encoding in ("gzip", "x-gzip"):
            return zlib.decompress(body, zlib.MAX_WBITS | 16)
        if encoding == "deflate":
            try:
                return zlib.decompress(body)
            except zlib.error:
                return zlib.decompress(body, -zlib.MAX_WBITS)  # raw deflate, as httpx accepts
    except zlib.error as exc:
        raise RemoteProtocolError(f"body does not decode as {encoding}: {exc}") from None
    return body  # identity, or a coding we never asked for: handed on as sent


def _readable(sock: socket.socket) -> bool:
    """An idle keep-alive socket with something to read was closed by the server (EOF) or is
    out of step: it must not carry the next request."""
    try:
        poller = select.poll()  # not select(): any descriptor number
        poller.register(sock, select.POLLIN)
        return bool(poller.poll(0))
    except (OSError, ValueError):
        return True


class Connections:
    """Keep-alive connections to one origin; thread-safe, at most `max_connections` at once."""

    def __init__(
        self,
        base_url: str,
        headers: dict[str, str],
        timeout: Timeout,
        max_connections: int,
        stop: threading.Event | None = None,
    ):
        parts = urlsplit(base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self.base_path = parts.path if parts.path.endswith("/") else parts.path + "/"
        self._headers = {**headers, "Accept-Encoding": "gzip, deflate", "Connection": "keep-alive"}
        self.timeout = timeout
        self._slots = threading.BoundedSemaphore(max_connections)
        self._lock = threading.Lock()
        self._idle: list[http.client.HTTPConnection] = []
        self._context: Any = None
        self._watchdog = Watchdog(timeout.attempt, stop, name="opsaudit-http-watchdog")
        # A monotonic time past which an attempt in flight is cut (the run's --time-budget).
        self.cutoff: float | None = None

    def _new(self) -> http.client.HTTPConnection:
        if not self._https:
            return http.client.HTTPConnection(self._host, self._port, timeout=self.timeout.connect)
        if self._context is None:
            import ssl

            import certifi

            self._context = ssl.create_default_context(cafile=certifi.where())
        return http.client.HTTPSConnection(
            self._host, self._port, timeout=self.timeout.connect, context=self._context
        )

    def _take(self) -> http.client.HTTPConnection:
        with self._lock:
            while self._idle:
                conn = self._idle.pop()
                if conn.sock is not None and not _readable(conn.sock):
                    return conn
                conn.close()
        return self._new()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        self._watchdog.close()

    def get(self, target: str) -> Response:
        """GET `target` (path and query, from the origin's root)."""
        if not self._slots.acquire(timeout=self.timeout.pool):
            raise PoolTimeout("no connection free")
        try:
            conn = self._take()
            try:
                with self._watchdog.watch(self.cutoff) as watch:
                    response, keep = self._exchange(conn, target, watch)
            except BaseException:
                conn.close()
                raise
            if keep:
                with self._lock:
                    self._idle.append(conn)
            else:
                conn.close()
            return response
        finally:
            self._slots.release()

    def _exchange(
        self, conn: http.client.HTTPConnection, target: str, watch: Watch
    ) -> tuple[Response, bool]:
        try:
            return self._exchange_watched(conn, target, watch)
        except TransportError:
            if watch.fired:  # the watchdog shut the socket: say so, not what the read saw
                raise self._cut(watch) from None
            raise

    def _cut(self, watch: Watch) -> TransportError:
        if self._watchdog.stopped:
            return Cut("the run was stopped")
        if watch.by_cutoff:
            return Cut("the run's time budget ended")
        return ReadTimeout(f"no complete answer within {self.timeout.attempt:g}s")

    def _exchange_watched(
        self, conn: http.client.HTTPConnection, target: str, watch: Watch
    ) -> tuple[Response, bool]:
        if conn.sock is None:
            try:
                conn.connect()
            except TimeoutError as exc:
                raise ConnectTimeout(str(exc) or "timed out") from None
            except OSError as exc:  # refused, unreachable, no such host, TLS refused
                raise ConnectError(str(exc)) from None
        sock = conn.sock
        assert sock is not None
        watch.sock = sock
        if watch.fired:  # while connecting: the watchdog had no socket to shut
            raise self._cut(watch)
        try:
            sock.settimeout(self.timeout.write)
            conn.request("GET", target, headers=self._headers)
        except TimeoutError as exc:
            raise WriteTimeout(str(exc) or "timed out") from None
        except OSError as exc:
            raise WriteError(str(exc)) from None
        try:
            sock.settimeout(self.timeout.read)
            reply = conn.getresponse()
            body = reply.read()
        except TimeoutError as exc:
            raise ReadTimeout(str(exc) or "timed out") from None
        except http.client.HTTPException as exc:  # no answer, a bad status line, cut short
            raise RemoteProtocolError(str(exc) or type(exc).__name__) from None
        except OSError as exc:  # reset by the peer
            raise ReadError(str(exc)) from None
        if watch.fired:  # shut while reading: an answer read to EOF may be cut short
            raise self._cut(watch)
        content = _decoded(body, reply.headers.get("Content-Encoding"))
        response = Response(reply.status, reply.reason, reply.headers, content)
        return response, not reply.will_close


__all__ = [
    "ConnectError",
    "ConnectTimeout",
    "Connections",
    "Cut",
    "PoolTimeout",
    "ReadError",
    "ReadTimeout",
    "RemoteProtocolError",
    "Response",
    "Timeout",
    "TimeoutException",
    "TransportError",
    "WriteError",
    "WriteTimeout",
]
