"""The API client's own HTTP transport (`api.http`, issue 24): what httpx did for it, kept.

A real HTTP/1.1 server on loopback answers the client's real requests; each test fails when its
mechanism is removed (the mutants `http-no-decoding` and `http-reuses-closed-connections`).
"""

from __future__ import annotations

import contextlib
import email.utils
import gzip
import json
import threading
import time
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from exporter.api.client import ApiClient, RetryPolicy
from exporter.api.http import Connections, ReadTimeout, Timeout
from exporter.api.pacing import Pacer
from exporter.core.errors import ApiError, TransientError

FAST = {"backoff_initial": 0.001, "backoff_max": 0.002}

KEY = "test-key-for-the-transport"
OPERATIONS = [
    {"id": f"op-{i}", "project_id": "p-1", "created_at": "2025-01-10T12:00:00Z", "extra": "x" * i}
    for i in range(3)
]


class _Handler(BaseHTTPRequestHandler):
    """Answers every GET with a page of `OPERATIONS`, encoded as the request allows; with
    `close_after` it closes the connection after answering, without saying so (a keep-alive
    connection the server timed out while it sat idle)."""

    protocol_version = "HTTP/1.1"
    server: Any

    def do_GET(self) -> None:
        srv = self.server
        srv.requests.append((self.path, dict(self.headers)))
        if srv.status != 200:
            message = json.dumps({"message": srv.message, "request_id": "r-1"}).encode()
            self.send_response(srv.status, srv.reason)
            if srv.retry_after is not None:
                self.send_header("Retry-After", srv.retry_after)
            self.send_header("Content-Length", str(len(message)))
            self.end_headers()
            self.wfile.write(message)
            return
        body = json.dumps({"operations": OPERATIONS, "pagination": {"cursor": "c 1+/="}}).encode()
        accepted = self.headers.get("Accept-Encoding", "")
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        if srv.encoding and srv.encoding in accepted:
            body = gzip.compress(body) if srv.encoding == "gzip" else zlib.compress(body)
            self.send_header("Content-Encoding", srv.encoding)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if srv.close_after:
            self.close_connection = True

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[Any]:
    srv = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    srv.requests = []
    srv.encoding = None
    srv.close_after = False
    srv.status = 200
    srv.retry_after = None
    srv.message = "unavailable"
    srv.reason = None  # the status line's reason phrase (None: the standard one)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _url(srv: Any) -> str:
    return f"http://127.0.0.1:{srv.server_address[1]}/api/v2"


def _client(srv: Any, **kwargs: Any) -> ApiClient:
    kwargs.setdefault("retry", RetryPolicy(max_attempts=1))
    return ApiClient(_url(srv), KEY, **kwargs)


@pytest.mark.parametrize("encoding", ["gzip", "deflate", None])
def test_compressed_pages_are_decoded_exactly(server: Any, encoding: str | None) -> None:
    server.encoding = encoding
    with _client(server) as client:
        page = client.list_operations("p 1/x", limit=1000, cursor="a b+c/=")
    # Each operation's text exactly as the server sent it, before compression.
    assert [bytes(r) for r in page.raw] == [json.dumps(o).encode() for o in OPERATIONS]
    assert [o.id for o in page.operations] == ["op-0", "op-1", "op-2"]
    assert page.cursor == "c 1+/="
    path, headers = server.requests[0]
    # The path and query as httpx sent them: the id quoted whole, the query form-encoded.
    assert path == "/api/v2/projects/p%201%2Fx/operations?limit=1000&cursor=a+b%2Bc%2F%3D"
    assert headers["Accept-Encoding"] == "gzip, deflate"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert headers["Accept"] == "application/json"
    assert headers["User-Agent"] == "opsaudit/0.1"


def test_a_connection_the_server_closed_while_idle_is_not_reused(server: Any) -> None:
    """Each answer is followed by a silent close: every request must go out on a fresh
    connection, none fail on the dead one (one attempt allowed: a failure would raise)."""
    server.close_after = True
    with _client(server) as client:
        for _ in range(5):
            page = client.list_operations("p-1", limit=1000)
            assert len(page.operations) == 3
        assert (client.stats.requests, client.stats.retries) == (5, 0)
    assert len(server.requests) == 5


def test_keep_alive_reuses_one_connection(server: Any) -> None:
    ports: list[int] = []
    original = _Handler.do_GET

    def remember(handler: _Handler) -> None:
        ports.append(handler.client_address[1])
        original(handler)

    _Handler.do_GET = remember  # type: ignore[method-assign]
    try:
        with _client(server) as client:
            for _ in range(4):
                client.list_operations("p-1", limit=1000)
    finally:
        _Handler.do_GET = original  # type: ignore[method-assign]
    assert len(ports) == 4 and len(set(ports)) == 1


def test_a_server_that_never_answers_is_a_read_timeout(server: Any) -> None:
    original = _Handler.do_GET
    release = threading.Event()

    def hang(handler: _Handler) -> None:
        release.wait(5)

    _Handler.do_GET = hang  # type: ignore[method-assign]
    try:
        with (
            _client(server, timeout=Timeout(connect=1, read=0.2, write=1, pool=1)) as client,
            pytest.raises(TransientError, match=r"timed out \(ReadTimeout\)"),
        ):
            client.list_operations("p-1", limit=1000)
    finally:
        release.set()
        _Handler.do_GET = original  # type: ignore[method-assign]


@contextlib.contextmanager
def _trickling(release: threading.Event) -> Iterator[None]:
    """The server sends its headers, then the body a byte every 50 ms (never a silence the read
    timeout sees) until `release` is set; after 3 s (60 bytes) it closes, the answer cut short
    (a mutant that lets the attempt run fails in 3 s, not in the 15 s of the whole body)."""
    original = _Handler.do_GET

    def trickle(handler: _Handler) -> None:
        handler.server.requests.append((handler.path, dict(handler.headers)))
        body = json.dumps({"operations": OPERATIONS, "pagination": {}}).encode()
        handler.send_response(200)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        with contextlib.suppress(OSError):
            for i in range(60):
                if release.wait(0.05):
                    return
                handler.wfile.write(body[i : i + 1])
        handler.close_connection = True

    _Handler.do_GET = trickle  # type: ignore[method-assign]
    try:
        yield
    finally:
        release.set()
        _Handler.do_GET = original  # type: ignore[method-assign]


def test_an_answer_trickled_a_byte_at_a_time_is_cut_at_the_attempts_bound(server: Any) -> None:
    """The read timeout bounds each wait for bytes: an answer trickled a byte every 50 ms held
    a request for ever (a `--time-budget 5s` sync still ran after 60 s, and every cron run
    after it exited 4, lock held). `Timeout.attempt` bounds the attempt, connect to last byte."""
    release = threading.Event()
    timeout = Timeout(connect=1, read=5, write=1, pool=1, attempt=0.5)
    connections = Connections(_url(server), {}, timeout, 1)
    started = time.monotonic()
    try:
        with _trickling(release), pytest.raises(ReadTimeout) as cut:
            connections.get("/api/v2/projects/p-1/operations")
        elapsed = time.monotonic() - started
    finally:
        connections.close()
    assert str(cut.value) == "no complete answer within 0.5s"
    assert 0.5 <= elapsed < 2.0, elapsed


@pytest.mark.parametrize("cut_by", ["stop", "cutoff"])
def test_a_cut_ends_the_request_in_flight_as_no_failure_of_the_apis(
    server: Any, cut_by: str
) -> None:
    """Ctrl-C (the run's stop) waited for the request in flight: with a trickled answer, for
    ever; so did a run past its --time-budget (`cutoff`: its end, with grace). Each is cut at
    once, and given up as a spent budget's (InterruptedError): not retried, and no failure of
    the API's (one cut, with the API "down" after one failure, ended the run `failed`, exit 5;
    on a request's last attempt, it failed the project)."""
    release, stop = threading.Event(), threading.Event()
    policy = RetryPolicy(max_attempts=1, down_after_failures=1, down_after_seconds=0)
    client = _client(server, timeout=Timeout(read=5), stop=stop, retry=policy)
    if cut_by == "stop":
        threading.Timer(0.3, stop.set).start()
    else:
        client.cutoff = time.monotonic() + 0.3
    started = time.monotonic()
    try:
        with _trickling(release), pytest.raises(InterruptedError) as cut:
            client.list_operations("p-1", limit=1000)
        elapsed = time.monotonic() - started
        if cut_by == "stop":
            with pytest.raises(InterruptedError):  # stopped: nothing more goes out
                client.list_operations("p-1", limit=1000)
        else:  # a cut is no failure (the API not taken for down): the next request is answered
            client.cutoff = None
            assert [o.id for o in client.list_operations("p-1", limit=1000).operations] == [
                "op-0",
                "op-1",
                "op-2",
            ]
    finally:
        client.close()
    assert (
        str(cut.value)
        == {
            "stop": "the run was stopped",
            "cutoff": "the run's time budget ended",
        }[cut_by]
    )
    assert 0.3 <= elapsed < 1.0, elapsed
    sent = {"stop": 1, "cutoff": 2}[cut_by]
    assert (len(server.requests), client.stats.requests, client.stats.retries) == (sent, sent, 0)


def test_retries_stop_after_max_attempts(server: Any) -> None:
    server.status = 503
    with (
        _client(server, retry=RetryPolicy(max_attempts=3, **FAST)) as client,
        pytest.raises(TransientError) as failed,
    ):
        client.list_operations("p-1", limit=1000)
    assert str(failed.value) == (
        "GET /projects/{project_id}/operations kept failing after 3 attempts: "
        "HTTP 503 unavailable (request id r-1)"
    )
    assert failed.value.status == 503
    assert (client.stats.requests, client.stats.retries, len(server.requests)) == (3, 2, 3)


def test_retries_stop_once_max_elapsed_has_passed(server: Any) -> None:
    """`max_elapsed` bounds a request's attempts whatever `max_attempts` allows: at 0 the first
    failure is the last."""
    server.status = 503
    with (
        _client(server, retry=RetryPolicy(max_attempts=50, max_elapsed=0, **FAST)) as client,
        pytest.raises(TransientError) as failed,
    ):
        client.list_operations("p-1", limit=1000)
    assert (client.stats.requests, client.stats.retries) == (1, 0)
    # The attempts made, not `max_attempts` (an API that never answered: "after 8 attempts"
    # when the 300 s of one request allowed 5 read timeouts of 60 s).
    assert str(failed.value) == (
        "GET /projects/{project_id}/operations kept failing after 1 attempt in the retry "
        "budget of one request (0 s): HTTP 503 unavailable (request id r-1)"
    )


@pytest.mark.parametrize("header", ["inf", "Infinity", "1e400", "1e20", "99999999999999999999"])
def test_a_retry_after_longer_than_the_retry_budget_fails_the_request_at_once(
    server: Any, header: str
) -> None:
    """A Retry-After no retry budget can wait out (infinite or astronomically long) fails the
    request at once with the server's answer: it was an OverflowError out of time.sleep (exit 5,
    "a bug") or a sleep of years. The pacer is not pushed back by it: the next request goes out
    in its slot (1 ms at 1000/s)."""
    server.status = 429
    server.retry_after = header
    pacer = Pacer(1000, clock=lambda: 100.0)  # a fixed clock: the next slot is 1 ms on
    with _client(server, retry=RetryPolicy(max_attempts=3, **FAST), pacer=pacer) as client:
        with pytest.raises(TransientError) as failed:
            client.list_operations("p-1", limit=1000)
        assert str(failed.value) == (
            "GET /projects/{project_id}/operations: HTTP 429 unavailable (request id r-1): "
            f"the server asked to retry after {float(header):g} s, longer than the retry "
            "budget of one request (300 s)"
        )
        assert failed.value.status == 429
        assert (client.stats.requests, client.stats.retries) == (1, 0)
        assert pacer.reserve("GET /projects") == pytest.approx(0.001)


@pytest.mark.parametrize(
    "header", ["nan", "-inf", "-5", "1e3x", "Wed, 21 Oct 2015 07:28:00 GMT", "1_000"]
)
def test_a_retry_after_that_is_not_a_number_of_seconds_falls_back_to_backoff(
    server: Any, header: str
) -> None:
    """Not a number of seconds (`nan`, negative: a zero wait before; RFC 9110 delta-seconds
    are digits) nor a date still ahead: the usual backoff (here 0.1-0.2 s), every attempt
    made."""
    server.status = 503
    server.retry_after = header
    started = time.monotonic()
    backoff = RetryPolicy(max_attempts=3, backoff_initial=0.2, backoff_max=0.2)
    with (
        _client(server, retry=backoff, pacer=Pacer(None)) as client,  # no pacing: waits are backoff
        pytest.raises(TransientError, match="kept failing after 3 attempts"),
    ):
        client.list_operations("p-1", limit=1000)
    assert (client.stats.requests, client.stats.retries) == (3, 2)
    assert time.monotonic() - started >= 0.2  # two waits of at least 0.1 s


def test_a_retry_after_within_the_budget_is_waited_out(server: Any) -> None:
    server.status = 503
    server.retry_after = "0.2"
    started = time.monotonic()
    with (
        _client(server, retry=RetryPolicy(max_attempts=2, **FAST)) as client,
        pytest.raises(TransientError, match="kept failing after 2 attempts"),
    ):
        client.list_operations("p-1", limit=1000)
    assert time.monotonic() - started >= 0.2
    assert (client.stats.requests, client.stats.retries) == (2, 1)


def test_a_retry_after_date_is_waited_out_from_the_servers_date(server: Any) -> None:
    """Retry-After as an HTTP date (RFC 9110) was ignored for backoff: a 429 asking for 90 s
    was retried 8 times in 42 s. It counts from the response's Date: here 2 s on (1-2 s, as
    both are whole seconds)."""
    server.status = 429
    server.retry_after = email.utils.formatdate(time.time() + 2, usegmt=True)
    started = time.monotonic()
    with (
        _client(server, retry=RetryPolicy(max_attempts=2, **FAST), pacer=Pacer(None)) as client,
        pytest.raises(TransientError, match="kept failing after 2 attempts"),
    ):
        client.list_operations("p-1", limit=1000)
    assert time.monotonic() - started >= 1.0
    assert (client.stats.requests, client.stats.retries) == (2, 1)


def test_a_retry_after_date_past_the_retry_budget_fails_the_request_at_once(server: Any) -> None:
    server.status = 429
    server.retry_after = email.utils.formatdate(time.time() + 3600, usegmt=True)
    with (
        _client(server, retry=RetryPolicy(max_attempts=3, **FAST)) as client,
        pytest.raises(TransientError, match="longer than the retry budget of one request"),
    ):
        client.list_operations("p-1", limit=1000)
    assert (client.stats.requests, client.stats.retries) == (1, 0)


def _tls_files(directory: Any) -> tuple[str, str, str]:
    """A test CA and a certificate it signed for 127.0.0.1: (CA file, cert file, key file)."""
    import datetime as dt
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = dt.datetime.now(dt.UTC)

    def certificate(subject: str, key: Any, issuer: str, signer: Any, ca: bool) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            san = x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
            builder = builder.add_extension(san, critical=False)
        return builder.sign(signer, hashes.SHA256())

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = certificate("opsaudit test CA", ca_key, "opsaudit test CA", ca_key, ca=True)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certificate("127.0.0.1", key, "opsaudit test CA", ca_key, ca=False)
    paths = (directory / "ca.pem", directory / "cert.pem", directory / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return str(paths[0]), str(paths[1]), str(paths[2])


@pytest.fixture
def tls_server(server: Any, tmp_path: Any) -> Any:
    """The same server behind TLS, its certificate signed by a CA of the test's own."""
    import ssl

    ca_file, cert_file, key_file = _tls_files(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    server.ca_file = ca_file
    return server


def _https_client(srv: Any) -> ApiClient:
    url = f"https://127.0.0.1:{srv.server_address[1]}/api/v2"
    return ApiClient(url, KEY, retry=RetryPolicy(max_attempts=1))


def test_https_is_verified_against_the_ca_bundle(tls_server: Any) -> None:
    """A certificate no CA of the bundle signed is refused before any request is sent: the
    key never reaches a server that cannot prove who it is."""
    with _https_client(tls_server) as client, pytest.raises(TransientError) as failed:
        client.list_operations("p-1", limit=1000)
    assert "connection failed (ConnectError)" in str(failed.value)
    assert tls_server.requests == []


def test_https_pages_from_a_server_the_bundle_trusts(
    tls_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import certifi

    monkeypatch.setattr(certifi, "where", lambda: tls_server.ca_file)
    with _https_client(tls_server) as client:
        for _ in range(2):
            page = client.list_operations("p-1", limit=1000)
            assert [bytes(r) for r in page.raw] == [json.dumps(o).encode() for o in OPERATIONS]
    path, headers = tls_server.requests[0]
    assert path == "/api/v2/projects/p-1/operations?limit=1000"
    assert headers["Authorization"] == f"Bearer {KEY}"
    assert len(tls_server.requests) == 2


# -- what the server wrote, in an error: redacted, then bounded ------------------------------------

OPERATIONS_ROUTE = "GET /projects/{project_id}/operations"


def _error_of(server: Any) -> str:
    with (
        _client(server, retry=RetryPolicy(max_attempts=1, **FAST)) as client,
        pytest.raises(ApiError) as caught,
    ):
        client.list_operations("p-1", limit=1000)
    return str(caught.value)


@pytest.mark.parametrize("status", [403, 503])
def test_a_reason_phrase_naming_the_key_is_redacted(server: Any, status: int) -> None:
    """A gateway's status line `HTTP/1.1 403 Forbidden for key <key>` (no JSON message) was the
    error's text as sent: the whole key in stderr, the run summary and RunSummary.error."""
    server.status, server.message, server.reason = status, "", f"Forbidden for key {KEY}"
    said = {
        403: f"{OPERATIONS_ROUTE}: HTTP 403: Forbidden for key [REDACTED] (request id r-1)",
        503: f"{OPERATIONS_ROUTE} kept failing after 1 attempt: "
        "HTTP 503 Forbidden for key [REDACTED] (request id r-1)",
    }
    assert _error_of(server) == said[status]


def test_a_key_the_cut_would_split_is_redacted_before_the_cut(server: Any) -> None:
    """A retried 503's message was cut at 200 characters, then redacted: a key straddling the
    cut was no longer whole, and its first part was printed and stored."""
    server.status, server.message, server.reason = 503, "", "x" * 190 + KEY
    assert _error_of(server) == (
        f"{OPERATIONS_ROUTE} kept failing after 1 attempt: "
        f"HTTP 503 {'x' * 190}[REDACTED] (request id r-1)"
    )


def test_a_huge_error_message_is_bounded(server: Any) -> None:
    """A 400 with a 2 MB message was copied whole: 12 MB of stderr, 6 MB per sync_runs row."""
    server.status, server.message = 400, "E" * 2_000_000
    assert _error_of(server) == f"{OPERATIONS_ROUTE}: HTTP 400: {'E' * 200} (request id r-1)"


def test_the_key_url_encoded_or_in_base64_is_redacted(server: Any) -> None:
    """Only the key as written was redacted: a gateway quoting it percent-encoded (a query it
    echoed) or in base64 (a Basic header of "ops:<key>") had it printed and stored."""
    key = "napi_Sup3r+S3cret/Key=XYZ"
    server.status = 403
    server.message = (
        "bad key napi_Sup3r%2BS3cret%2FKey%3DXYZ or napi_Sup3r%2bS3cret%2fKey%3dXYZ, "
        "bmFwaV9TdXAzcitTM2NyZXQvS2V5PVhZWg==, Basic b3BzOm5hcGlfU3VwM3IrUzNjcmV0L0tleT1YWVo="
    )
    with (
        ApiClient(_url(server), key, retry=RetryPolicy(max_attempts=1)) as client,
        pytest.raises(ApiError) as caught,
    ):
        client.list_operations("p-1", limit=1000)
    assert str(caught.value) == (
        f"{OPERATIONS_ROUTE}: HTTP 403: bad key [REDACTED] or [REDACTED], "
        "[REDACTED]g==, Basic b3BzOm[REDACTED]o= (request id r-1)"
    )


def test_a_servers_control_characters_are_escaped_in_the_error(server: Any) -> None:
    """A 400's message with ESC and BEL went as it was into the error, the state's last_error
    and every terminal that printed them (check's project_error, the sync's Error line): the
    screen cleared, the bell rang. Escaped as Python writes them, before the cut."""
    server.status, server.message = 400, "bad \x1b[2J\x07request\u202e" + "E" * 300
    assert _error_of(server) == (
        f"{OPERATIONS_ROUTE}: HTTP 400: bad \\x1b[2J\\x07request\\u202e{'E' * 172} (request id r-1)"
    )
