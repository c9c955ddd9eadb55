"""The management API client: pooled keep-alive connections, pacing, bounded retries, typed errors.

Every request goes through `ApiClient.get_json`, which paces (see `api.pacing`), retries what is
safe to retry (429, 423, 5xx, dropped connections, timeouts, truncated or malformed bodies),
and maps the rest to the `core.errors` tree. The key lives only in the Authorization header: it is
never put in a message, a log line or an exception.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

import msgspec
import orjson

from exporter.api.http import (
    ConnectError,
    Connections,
    Cut,
    Response,
    Timeout,
    TimeoutException,
    TransportError,
)
from exporter.api.pacing import Pacer
from exporter.core.errors import (
    ApiError,
    ApiUnavailableError,
    AuthError,
    ConfigError,
    NotFoundError,
    ScopeError,
    TransientError,
    check_type,
    escape_controls,
    redact,
    redact_url,
    register_secret,
)
from exporter.core.model import DEFAULT_BASE_URL
from exporter.core.operation import Operation

log = logging.getLogger("opsaudit.client")

_RETRY_STATUSES = frozenset({423, 429, 500, 502, 503, 504})
DEFAULT_TIMEOUT = Timeout()  # its defaults: connect 10 s, read 60, write 10, pool 120


@dataclass
class RequestStats:
    """Counters of one run, read by the sync summary and the benchmarks."""

    requests: int = 0
    responses_429: int = 0
    retries: int = 0
    by_route: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, route: str, status: int | None) -> None:
        with self._lock:
            self.requests += 1
            self.by_route[route] = self.by_route.get(route, 0) + 1
            if status == 429:
                self.responses_429 += 1

    def count_retry(self) -> None:
        with self._lock:
            self.retries += 1


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try before a request becomes a per-project error."""

    max_attempts: int = 8
    max_elapsed: float = 300.0  # seconds across all attempts of one request
    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    # The API is down for everything: after this many failed attempts in a row (5xx, refused,
    # dropped; not 429) with no success for `down_after_seconds`, every request fails at once.
    down_after_failures: int = 24
    down_after_seconds: float = 120.0
    # Before the API has answered anything in this run, a connection that cannot be made
    # (refused, no such host) is tried this many times, then the run stops: the network or
    # --base-url is wrong, and 8 backed-off attempts per request only hid that for 87 s.
    first_connect_attempts: int = 3


def _page_params(limit: int, cursor: str | None, **extra: str | None) -> dict[str, Any]:
    """Query parameters of a paged listing; `limit` is always sent (PRODUCT.md: without it the
    server may return everything)."""
    params: dict[str, Any] = {"limit": limit}
    for name, value in (("cursor", cursor), *extra.items()):
        if value is not None:
            params[name] = value
    return params


class _OperationsBody(msgspec.Struct):
    operations: list[Operation]
    pagination: Any = None


class _RawOperations(msgspec.Struct):
    """Only the byte slices of a page's operations: `raw` keeps exactly what the server sent."""

    operations: list[msgspec.Raw]


_OPERATIONS_DECODER = msgspec.json.Decoder(_OperationsBody)
_RAW_DECODER = msgspec.json.Decoder(_RawOperations)


@dataclass(frozen=True)
class OperationsPage:
    """One page of `GET /projects/{id}/operations`."""

    operations: list[Operation]
    raw: list[msgspec.Raw]  # each operation's JSON text, as sent
    cursor: str | None  # pagination.cursor, passed back verbatim


class _Retryable(Exception):
    """One failed attempt that may succeed if repeated."""

    def __init__(self, reason: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(reason)
        self.retry_after = retry_after
        self.status = status


def _server_text(text: str, limit: int = 200) -> str:
    """A text the server (or a connection error) wrote, as a message may carry it: redacted,
    then cut. Cut first, a key the cut split slipped past redaction (53 of its 64 characters in
    stderr and the state); never cut, a 2 MB error message was copied into every record. Its
    control characters escaped: stored in `last_error`, they reached every terminal that showed
    it (check's project_error, the sync's Error line) as they were."""
    return escape_controls(redact(text))[:limit]


def _reason(exc: BaseException) -> str:
    """A connection error's own words ("[Errno 111] Connection refused"), redacted, short."""
    text = str(exc).strip() or type(exc).__name__
    return _server_text(text.splitlines()[0])


def _retry_after_seconds(response: Response) -> float | None:
    """`Retry-After` in seconds (infinite for `inf` or a number past a float: the loop refuses
    a wait longer than its budget), or None (backoff) for a negative number, none at all
    (`nan`) or a date already past. An HTTP date (RFC 9110 allows it) counts from the response's
    own Date (the server's clock), else from this host's: it was ignored, and a 429 asking for
    90 s was retried 8 times in 42 s, then the project failed."""
    value = response.headers.get("Retry-After")
    if not value or "_" in value:
        return None  # float() reads "1_000"; RFC 9110 delta-seconds are digits
    try:
        seconds = float(value)
    except ValueError:
        until = _http_date(value)
        if until is None:
            return None
        now = _http_date(response.headers.get("Date") or "")
        seconds = until - (time.time() if now is None else now)
        return seconds if seconds > 0 else None
    return seconds if seconds >= 0 else None  # nan compares false too


def _http_date(value: str) -> float | None:
    """An HTTP date as a POSIX timestamp, or None when it is not one."""
    try:
        moment = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # "-0000": UTC by RFC 5322, not this host's zone
        moment = moment.replace(tzinfo=timezone.utc)
    return moment.timestamp()


def _error_message(response: Response) -> tuple[str, str | None]:
    """The server's message and request id, from the JSON error body or the header, or its
    status line's reason phrase (a gateway's may name the key): each redacted and bounded."""
    request_id = response.headers.get("X-Neon-Ret-Request-Id")
    message = ""
    try:
        body = orjson.loads(response.content)
        if isinstance(body, dict):
            message = _server_text(str(body.get("message") or ""))
            request_id = request_id or body.get("request_id")
    except orjson.JSONDecodeError:
        pass
    if request_id is not None:
        request_id = _server_text(str(request_id), 100)
    reason = _server_text(response.reason_phrase)
    return message or reason or f"HTTP {response.status_code}", request_id


# Beyond this (seconds), this host's clock and the API's differ by more than the minute of skew
# the walk allows: what counts as recent (the settling window of a finished operation, the hot
# open operations, an idle project's listing marks) compares the API's times with this host's.
CLOCK_SKEW_LIMIT = 60.0


def clock_skew_problem(skew: float | None) -> str | None:
    """What to say of `ApiClient.clock_skew` when it is beyond the limit, else None."""
    if skew is None or abs(skew) <= CLOCK_SKEW_LIMIT:
        return None
    minutes, seconds = divmod(round(abs(skew)), 60)
    way = "ahead of" if skew < 0 else "behind"
    return (
        f"this host's clock is {minutes}m{seconds:02d}s {way} the API's (its Date header): "
        "recent changes are judged by this host's clock, so an operation's change made in place "
        "or an idle project's new operations may be missed"
    )


def validate_base_url(base_url: str) -> str:
    """The API's address with one trailing slash; a `ConfigError` (exit 2) saying what is wrong
    when it is not an http(s) URL with a host and a usable port (a port that is not a number
    was a ValueError out of the transport: exit 5, "a bug")."""
    problem = _base_url_problem(base_url)
    if problem is not None:
        raise ConfigError(
            f"--base-url {redact_url(base_url)!r} {problem}; expected something like {DEFAULT_BASE_URL}"
        )
    return base_url.rstrip("/") + "/"


def _base_url_problem(base_url: str) -> str | None:
    try:
        parts = urlsplit(base_url)
    except ValueError:  # e.g. an unclosed [ of an IPv6 address
        return "is not a valid URL"
    if parts.scheme not in ("http", "https") or not parts.netloc:
        return "is not an http(s) URL"
    if "@" in base_url:
        # Never sent (the key goes in a header) and printed wherever the URL is: refused. Any
        # "@": a password holding "/" or "?" ends the host early (http://admin:12345/S3cret@h
        # was taken for host admin, port 12345, and printed in every connect error).
        return "holds credentials before the host; the API key goes in NEON_API_KEY"
    if parts.query or parts.fragment or base_url.endswith(("?", "#")):
        return "has a query string or a fragment, which may hold tokens (not accepted)"
    if not parts.hostname:
        return "has no host"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "has no usable port (a number from 1 to 65535 after the host's colon)"
    return None


_KEY_CHARS = re.compile(r"[\x21-\x7e]+")


def check_api_key(api_key: str | None) -> str:
    """The key, stripped; a missing or malformed key is a clear key error at once (never a
    connection failure retried for a minute, and never a traceback holding it)."""
    # bytes (a key file read with "rb") failed in the regex below, a bare TypeError
    check_type("api_key", api_key, (str, type(None)), "a str (of a bytes key: key.decode())")
    key = (api_key or "").strip()
    if not key:
        raise AuthError(
            "no API key: set NEON_API_KEY or pass --api-key-file "
            "(create one in the console under account or organization settings)"
        )
    if not _KEY_CHARS.fullmatch(key):
        # What is wrong, then ": " and the fix: doctor shows the two apart.
        raise AuthError(
            "the API key is malformed (it contains a space, a line break, a control or a "
            "non-ASCII character): create or copy the key again (check the key file for a "
            "stray newline or a copy-paste accident)"
        )
    return key


class ApiClient:
    """A thread-safe client of the management API (spec sections 4 and 5)."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        pacer: Pacer | None = None,
        retry: RetryPolicy | None = None,
        timeout: Timeout = DEFAULT_TIMEOUT,
        max_connections: int = 16,
        stop: threading.Event | None = None,
    ):
        api_key = check_api_key(api_key)
        register_secret(api_key)
        self.base_url = validate_base_url(base_url)
        self.pacer = pacer or Pacer()
        self.retry = retry or RetryPolicy()
        self.stats = RequestStats()
        # Asked before a retry waits `delay` seconds: True gives the request up (InterruptedError,
        # as a spent budget: the run's --time-budget would pass, or the run was stopped).
        self.halt: Callable[[float], bool] | None = None
        # Asked after `halt`, before a retry is sent: False gives the request up the same way
        # (--max-requests counts every attempt, and no longer covers this one).
        self.charge_retry: Callable[[], bool] | None = None
        self._any_success = False
        self._any_answer = False  # any HTTP response at all, in this client's life
        self._connect_failures = 0  # failed connections before the first answer
        self._warned_connect = False
        self._health_lock = threading.Lock()
        self._failures_in_a_row = 0
        self._last_success = time.monotonic()
        self._down: str | None = None
        # Seconds the API's clock (its Date header) is ahead of this host's; None until known.
        self.clock_skew: float | None = None
        self._http = Connections(
            self.base_url,
            {
                "Authorization": f"Bearer {api_key}",
                "Accept": "application/json",
                "User-Agent": "opsaudit/0.1",
            },
            timeout,
            max_connections,
            stop,
        )
        # Set (the CLI does on SIGINT / SIGTERM): the requests in flight are cut, none is sent
        # after its pacing wait, and a retry's wait ends at once (InterruptedError).
        self.stop = stop

    def __repr__(self) -> str:  # never show the key
        return f"ApiClient({self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the endpoints opsaudit uses ------------------------------------------------------

    def list_operations(
        self, project_id: str, *, limit: int, cursor: str | None = None
    ) -> OperationsPage:
        body, raw = self.get_json(
            f"projects/{quote(project_id, safe='')}/operations",
            _page_params(limit, cursor),
            route="GET /projects/{project_id}/operations",
            expect="operations",
            raw_operations=True,
        )
        if body is None:
            raise ApiError(
                f"project {project_id}: malformed operations page (an item is not an object)"
            )
        pagination = body.pagination
        next_cursor = pagination.get("cursor") if isinstance(pagination, dict) else None
        return OperationsPage(
            body.operations, raw, next_cursor if isinstance(next_cursor, str) else None
        )

    def _member(self, path: str, route: str, key: str) -> Any:
        """`body[key]` of one GET without parameters (the key checked by `get_json`)."""
        return self.get_json(path, None, route=route, expect=key)[key]

    def get_project(self, project_id: str) -> dict[str, Any]:
        path = f"projects/{quote(project_id, safe='')}"
        return self._member(path, "GET /projects/{project_id}", "project")

    def get_operation(self, project_id: str, operation_id: str) -> dict[str, Any]:
        path = f"projects/{quote(project_id, safe='')}/operations/{quote(operation_id, safe='')}"
        route = "GET /projects/{project_id}/operations/{operation_id}"
        return self._member(path, route, "operation")

    def list_branches(
        self, project_id: str, *, limit: int, cursor: str | None = None
    ) -> tuple[list[Any], str | None]:
        """One page of a project's branches and `pagination.next` (None: the last page)."""
        body = self.get_json(
            f"projects/{quote(project_id, safe='')}/branches",
            _page_params(limit, cursor),
            route="GET /projects/{project_id}/branches",
            expect="branches",
        )
        pagination = body.get("pagination")
        following = pagination.get("next") if isinstance(pagination, dict) else None
        branches = body["branches"]
        if not isinstance(branches, list):
            raise ApiError(f"project {project_id}: 'branches' is not a list")
        return branches, following if isinstance(following, str) and following else None

    def list_endpoints(self, project_id: str) -> list[Any]:
        """A project's compute endpoints (one page: the listing has no paging)."""
        path = f"projects/{quote(project_id, safe='')}/endpoints"
        endpoints = self._member(path, "GET /projects/{project_id}/endpoints", "endpoints")
        if not isinstance(endpoints, list):
            raise ApiError(f"project {project_id}: 'endpoints' is not a list")
        return endpoints

    def list_projects(
        self, *, limit: int, cursor: str | None = None, org_id: str | None = None
    ) -> dict[str, Any]:
        return self.get_json(
            "projects",
            _page_params(limit, cursor, org_id=org_id),
            route="GET /projects",
            expect="projects",
        )

    def list_shared_projects(self, *, limit: int, cursor: str | None = None) -> dict[str, Any]:
        return self.get_json(
            "projects/shared",
            _page_params(limit, cursor),
            route="GET /projects/shared",
            expect="projects",
        )

    def list_organizations(self) -> list[dict[str, Any]]:
        route = "GET /users/me/organizations"
        return self._member("users/me/organizations", route, "organizations")

    # -- the request loop -----------------------------------------------------------------

    def get_json(
        self,
        path: str,
        params: dict[str, Any] | None,
        *,
        route: str,
        expect: str,
        raw_operations: bool = False,
    ) -> Any:
        """GET `path`, retrying what is retryable; return the decoded body.

        `expect` is the key the body must carry: a 200 without it is retried (PRODUCT.md: "Rarely
        a 200 carries no expected key").
        """
        # A plain loop, as tenacity ran it (stop after `max_attempts` or once `max_elapsed` has
        # passed since the first attempt began; the wait drawn before that check): importing
        # tenacity loaded tornado and asyncio, ~15-50 ms of every run (issue 24).
        policy = self.retry
        started = time.monotonic()
        attempt = 1
        while True:
            try:
                return self._attempt(path, params, route, expect, raw_operations)
            except _Retryable as exc:
                if self._stopped():  # cut by the stop, or failed meanwhile: not retried
                    raise InterruptedError("stopped") from None
                delay = self._wait(exc, attempt)
                made = f"{attempt} attempt{'s' if attempt > 1 else ''}"
                if attempt >= policy.max_attempts:
                    raise TransientError(
                        f"{route} kept failing after {made}: {exc}", status=exc.status
                    ) from None
                if time.monotonic() - started >= policy.max_elapsed:  # (fewer attempts made)
                    raise TransientError(
                        f"{route} kept failing after {made} in the retry budget of "
                        f"one request ({policy.max_elapsed:g} s): {exc}",
                        status=exc.status,
                    ) from None
                if self.halt is not None and self.halt(delay):
                    raise InterruptedError("budget reached") from None
                if self.charge_retry is not None and not self.charge_retry():
                    raise InterruptedError("budget reached") from None
                self.stats.count_retry()
                log.info("retrying after %s (attempt %d)", exc, attempt)
            if self.stop is None:
                time.sleep(delay)
            elif self.stop.wait(delay):
                raise InterruptedError("stopped")
            attempt += 1

    def _note_clock(self, response: Response) -> None:
        """The server's clock against this host's, from the first Date header (1 s steps)."""
        server = _http_date(response.headers.get("Date") or "")
        if server is not None:
            self.clock_skew = server - time.time()

    def _stopped(self) -> bool:
        return self.stop is not None and self.stop.is_set()

    @property
    def cutoff(self) -> float | None:
        """A monotonic time past which an attempt in flight is cut (the run's --time-budget,
        with some grace): a trickled answer never holds the run long past its budget."""
        return self._http.cutoff

    @cutoff.setter
    def cutoff(self, value: float | None) -> None:
        self._http.cutoff = value

    def _succeeded(self) -> None:
        with self._health_lock:
            self._failures_in_a_row = 0
            self._last_success = time.monotonic()

    def _failed(self, route: str) -> None:
        """Count a failed attempt; once the API looks down for everything, stop the run."""
        policy = self.retry
        with self._health_lock:
            self._failures_in_a_row += 1
            silent = time.monotonic() - self._last_success
            if (
                self._down is None
                and self._failures_in_a_row >= policy.down_after_failures
                and silent >= policy.down_after_seconds
            ):
                self._down = (
                    f"the API at {self.base_url} is failing every request "
                    f"({self._failures_in_a_row} failures in a row, none succeeded for "
                    f"{silent:.0f}s; last: {route}); stopping the run early. Check the "
                    "platform's status page or --base-url, then run again"
                )
            down = self._down
        if down is not None:
            raise ApiUnavailableError(down)

    def _never_connected(self, route: str, exc: ConnectError) -> None:
        """A connection could not be made and the API never answered this run: after
        `first_connect_attempts`, stop the run (ApiUnavailableError, exit 5) instead of
        retrying every request; once it has answered, a failed connection is retried as usual."""
        with self._health_lock:
            if self._any_answer:
                return
            self._connect_failures += 1
            if self._connect_failures < self.retry.first_connect_attempts:
                warn, self._warned_connect = not self._warned_connect, True
                if warn:  # said without -v: the retries below take a few seconds
                    log.warning("cannot connect to %s (%s); retrying", self.base_url, _reason(exc))
                return
            self._down = (
                f"cannot connect to {self.base_url} ({_reason(exc)}; {self._connect_failures} "
                f"attempts, first request {route}): check --base-url, DNS and the network "
                "(firewall, proxy)"
            )
            down = self._down
        raise ApiUnavailableError(down)

    def _answered(self) -> None:
        self._any_success = True
        self.pacer.on_success()

    def _operations_body(
        self, content: bytes, status: int
    ) -> tuple[_OperationsBody | None, list[msgspec.Raw]]:
        """An operations page decoded once into `Operation`s, plus each operation's JSON slice.
        A body that does not fit is told apart as before: malformed JSON, no `operations`, or
        `operations` not a list are retried; items that are not objects are the page's fault
        (None: `list_operations` raises ApiError)."""
        try:
            body: _OperationsBody | None = _OPERATIONS_DECODER.decode(content)
        except msgspec.ValidationError:
            body = None
        except (msgspec.DecodeError, UnicodeDecodeError):
            # A byte that is not UTF-8 is UnicodeDecodeError before msgspec 0.23 (DecodeError
            # since): it escaped as "a bug" (exit 5, the healthy projects not yet committed lost).
            raise _Retryable("malformed or truncated JSON body", status=status) from None
        if body is None:
            try:
                loose = orjson.loads(content)
            except orjson.JSONDecodeError:
                raise _Retryable("malformed or truncated JSON body", status=status) from None
            if not isinstance(loose, dict) or "operations" not in loose:
                raise _Retryable("200 without 'operations' in the body", status=status)
        self._answered()
        try:
            raw = _RAW_DECODER.decode(content).operations
        except (msgspec.DecodeError, msgspec.ValidationError):
            raise _Retryable("'operations' is not a list", status=status) from None
        return body, raw

    def _wait(self, exc: _Retryable, attempt: int) -> float:
        """Seconds before the attempt after `attempt` (1 = the first) failed with `exc`."""
        if exc.retry_after is not None:
            return exc.retry_after
        # Exponential backoff with full jitter: spreads retries of parallel workers.
        ceiling = min(self.retry.backoff_max, self.retry.backoff_initial * 2 ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)

    def _attempt(
        self,
        path: str,
        params: dict[str, Any] | None,
        route: str,
        expect: str,
        raw_operations: bool,
    ) -> Any:
        if self._down is not None:
            raise ApiUnavailableError(self._down)
        self.pacer.acquire(route)
        if self._stopped():  # while waiting for its slot (README: "stopped new requests at once")
            raise InterruptedError("stopped")
        target = self._http.base_path + path
        if params:
            target += "?" + urlencode(params)  # as httpx encoded them (spaces as +)
        try:
            response = self._http.get(target)
        except Cut as exc:  # the run's own doing: not the API's failure, nor to retry
            self.stats.count(route, None)
            if self.halt is not None:
                self.halt(0.0)  # past --time-budget's end: the budget is reached
            raise InterruptedError(str(exc)) from None
        except TimeoutException as exc:
            self.stats.count(route, None)
            self._failed(route)
            raise _Retryable(f"timed out ({type(exc).__name__})") from None
        except ConnectError as exc:
            self.stats.count(route, None)
            self._never_connected(route, exc)
            self._failed(route)
            raise _Retryable(f"connection failed ({type(exc).__name__})") from None
        except TransportError as exc:
            self.stats.count(route, None)
            self._failed(route)
            raise _Retryable(f"connection failed ({type(exc).__name__})") from None
        self._any_answer = True
        if self.clock_skew is None:
            self._note_clock(response)
        status = response.status_code
        self.stats.count(route, status)
        if status >= 500:
            self._failed(route)
        elif status != 429:
            self._succeeded()
        if status == 200:
            if raw_operations:
                return self._operations_body(response.content, status)
            try:
                body = orjson.loads(response.content)
            except orjson.JSONDecodeError:
                raise _Retryable("malformed or truncated JSON body", status=status) from None
            if not isinstance(body, dict) or expect not in body:
                raise _Retryable(f"200 without {expect!r} in the body", status=status)
            self._answered()
            return body
        message, request_id = _error_message(response)
        if status in _RETRY_STATUSES:
            retry_after = _retry_after_seconds(response)
            rid = f" (request id {request_id})" if request_id else ""
            reason = f"HTTP {status} {message}{rid}"
            if retry_after is not None and retry_after > self.retry.max_elapsed:
                # No budget waits that out (time.sleep raised OverflowError on inf: exit 5, "a
                # bug"); nor is the pacer pushed back by it, which would stall every request.
                raise TransientError(
                    f"{route}: {reason}: the server asked to retry after {retry_after:g} s, "
                    f"longer than the retry budget of one request ({self.retry.max_elapsed:g} s)",
                    status=status,
                )
            if status == 429:
                self.pacer.on_throttled(retry_after)
            raise _Retryable(reason, retry_after, status)
        if status == 401:
            if self._any_success:
                problem = "the API key stopped working during the run (revoked?)"
            else:
                problem = "the API key was rejected (invalid or revoked)"
            raise AuthError(
                f"{problem}: 401 from {route}; create a new key in the console and update "
                "NEON_API_KEY or --api-key-file",
                status=status,
                request_id=request_id,
            )
        if status == 404:
            raise NotFoundError(f"{route}: not found", status=status, request_id=request_id)
        if status == 400 and "org_id" in message:
            raise ScopeError(message, status=status, request_id=request_id)
        raise ApiError(f"{route}: HTTP {status}: {message}", status=status, request_id=request_id)
