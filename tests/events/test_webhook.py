"""The webhook's URL and attempts (PRODUCT.md "Events"): a URL that can never be sent is a usage
error, one that cannot be sent fails its attempts and not the run, and `--webhook-timeout` bounds
a whole attempt."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner

from exporter.cli import cli
from exporter.core.errors import ConfigError
from exporter.events.webhook import read_webhook_secret, validate_webhook_url

from .conftest import Receiver, sync_events, versions_after

ROOT = Path(__file__).resolve().parents[2]
WAIT = "; the events wait in the outbox for the next run"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        (
            "http://127.0.0.1:1/hook?token=TÖPSECRET",
            "--webhook http://127.0.0.1:1/…: its path and query must be ASCII without spaces "
            "or control characters: percent-encode the others (Ö as %C3%96)",
        ),
        (
            "https://u:TOPSECRET@h.example/hö?x=TOPSECRET",
            "--webhook https://h.example/…: its path and query must be ASCII without spaces "
            "or control characters: percent-encode the others (Ö as %C3%96)",
        ),
        (
            "http://h.example/a b?x=TOPSECRET",
            "--webhook http://h.example/…: its path and query must be ASCII without spaces "
            "or control characters: percent-encode the others (Ö as %C3%96)",
        ),
        (
            f"http://{'a' * 64}.example/hook?token=TOPSECRET",
            f"--webhook http://{'a' * 64}.example/…: its host is not a DNS name (labels of "
            "1 to 63 characters, no spaces)",
        ),
        (
            "http://a..b/hook?token=TOPSECRET",
            "--webhook http://a..b/…: its host is not a DNS name (labels of 1 to 63 "
            "characters, no spaces)",
        ),
        (
            "http://127.0.0.1:99999/h?token=TOPSECRET",
            "--webhook http://127.0.0.1:99999/…: its port is not a number from 1 to 65535, or "
            "its IPv6 address lacks its ]",
        ),
        (
            "http://127.0.0.1:0/h?token=TOPSECRET",
            "--webhook http://127.0.0.1:0/…: its port is not a number from 1 to 65535, or its "
            "IPv6 address lacks its ]",
        ),
        (
            # What follows the colon is not shown: it may be the end of a password.
            "http://u:TOPSECRET@127.0.0.1:abc/h?token=TOPSECRET",
            "--webhook http://127.0.0.1/…: its port is not a number from 1 to 65535, or its "
            "IPv6 address lacks its ]",
        ),
        (
            # A password with an unencoded "/" (base64): read as every URL parser reads it
            # (host "alice", port "s3cr"), none of the secret part shown.
            "https://alice:s3cr/TOPSECRET@hooks.example.com/in?token=TOPSECRET",
            "--webhook https://alice/…: its port is not a number from 1 to 65535, "
            "or its IPv6 address lacks its ]",
        ),
        (
            "http://[::1/h?token=TOPSECRET",
            "--webhook http://[::1/…: its port is not a number from 1 to 65535, or its IPv6 "
            "address lacks its ]",
        ),
        (
            "ftp://u:TOPSECRET@127.0.0.1/h?token=TOPSECRET",
            "--webhook ftp://127.0.0.1/… is not an http(s) URL with a host",
        ),
        ("http:///h?token=TOPSECRET", "--webhook http:///… is not an http(s) URL with a host"),
        ("TOPSECRET", "--webhook (not shown) is not an http(s) URL with a host"),
    ],
)
def test_a_url_that_can_never_be_sent_is_a_usage_error(url: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        validate_webhook_url(url)
    assert str(refused.value) == message


@pytest.mark.parametrize(
    "url",
    [
        " http://127.0.0.1:8080/hooks?token=a%C3%96b&x=1#frag ",
        "https://u:p%40ss@hooks.example./in",
        "http://[::1]:1/h",
        "http://bücher.example/h",
        f"http://{'a' * 63}.example",
    ],
)
def test_a_url_that_can_be_sent_is_kept(url: str) -> None:
    assert validate_webhook_url(url) == url.strip()


def test_cli_refuses_an_unsendable_url_with_exit_2_and_shows_no_secret(tmp_path: Path) -> None:
    secret = tmp_path / "webhook.secret"
    secret.write_text("whsec_c2VjcmV0LWtleS1tYXRlcmlhbA==\n")
    env = {
        **os.environ,
        "NEON_API_KEY": "unused",  # refused before any request
        "OPSAUDIT_BASE_URL": "http://127.0.0.1:9/api/v2",
        "PYTHONPATH": str(ROOT),
    }
    shown = {
        "http://127.0.0.1:1/hook?token=TÖPSECRET": "http://127.0.0.1:1/…: its path and query "
        "must be ASCII without spaces or control characters: percent-encode the others (Ö as "
        "%C3%96)",
        "http://u:TOPSECRET@127.0.0.1:99999/h?token=TOPSECRET": "http://127.0.0.1:99999/…: its "
        "port is not a number from 1 to 65535, or its IPv6 address lacks its ]",
    }
    base = [sys.executable, "-m", "exporter", "sync", "--data-dir", str(tmp_path / "data")]
    for url, text in shown.items():
        run = subprocess.run(
            [*base, "--webhook", url, "--webhook-secret-file", str(secret)],
            env=env,
            capture_output=True,
            text=True,
        )
        assert (run.returncode, run.stdout) == (2, "")
        assert run.stderr.splitlines()[-1] == f"Error: --webhook {text}"
        assert "TOPSECRET" not in run.stderr and "TÖPSECRET" not in run.stderr
    assert not (tmp_path / "data").exists()  # no run began, none is recorded


def test_a_webhook_secret_file_that_is_not_text_is_a_usage_error(tmp_path: Path) -> None:
    """A byte that is not UTF-8 in the file was a UnicodeDecodeError out of the read: exit 5,
    "a bug"; it is refused as --api-key-file's is."""
    secret = tmp_path / "webhook.secret"
    secret.write_bytes(b"whsec_abc\xff\n")
    result = CliRunner().invoke(
        cli,
        [
            "sync",
            "--data-dir",
            str(tmp_path / "data"),
            "--base-url",
            "http://127.0.0.1:9/api/v2",
            "--webhook",
            "http://127.0.0.1:1/h",
            "--webhook-secret-file",
            str(secret),
        ],
        env={"NEON_API_KEY": "unused"},  # refused before any request
    )
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        2,
        f"Error: --webhook-secret-file {secret} is not text (UTF-8): save the secret as plain text",
    )
    assert not (tmp_path / "data").exists()


_SECRET_TEXT = "whsec_Jkae/7PcQXF7bK+d6jD0j30GuomSuQcrLEub5rLTIjQ="


@pytest.mark.parametrize(
    "given",
    [_SECRET_TEXT, _SECRET_TEXT.removeprefix("whsec_"), " " + _SECRET_TEXT],
    ids=["whsec", "bare-base64", "leading-space"],
)
@pytest.mark.parametrize("how", ["option", "env"])
def test_a_secret_given_for_its_files_path_is_never_shown(
    tmp_path: Path, given: str, how: str
) -> None:
    """`--webhook-secret-file "$(cat whsec)"` or OPSAUDIT_WEBHOOK_SECRET_FILE=whsec_... (the
    secret where its file's path goes) printed the secret in the usage error, into cron's mail
    and the log: it is refused without it."""
    args = [
        "sync",
        "--data-dir",
        str(tmp_path / "data"),
        "--base-url",
        "http://127.0.0.1:9/api/v2",
        "--webhook",
        "http://127.0.0.1:1/h",
    ]
    env = {"NEON_API_KEY": "unused"}  # refused before any request
    if how == "option":
        args += ["--webhook-secret-file", given]
    else:
        env["OPSAUDIT_WEBHOOK_SECRET_FILE"] = given
    result = CliRunner().invoke(cli, args, env=env)
    assert (result.exit_code, result.stderr.splitlines()[-1]) == (
        2,
        "Error: --webhook-secret-file: no such file, and what was given looks like a secret, "
        "not a file's path (not shown): write the secret to a file and give that file's path",
    )
    assert "Jkae" not in result.output + result.stderr
    assert not (tmp_path / "data").exists()


def test_a_missing_secret_files_path_is_still_named(tmp_path: Path) -> None:
    """A path mistyped is named, as any other file's (not taken for a secret)."""
    for missing in (tmp_path / "whsec", tmp_path / "opsaudit/webhook.secret"):
        with pytest.raises(ConfigError) as info:
            read_webhook_secret(missing)
        assert str(info.value) == (
            f"--webhook-secret-file {missing}: cannot read it (No such file or directory)"
        )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("{receiver}/hooks?token=TÖPSECRET", "UnicodeEncodeError"),  # not ASCII on the wire
        (f"http://{'a' * 70}.invalid/hooks?token=TOPSECRET", "UnicodeError"),  # no DNS name
        ("http://a b/hooks?token=TOPSECRET", "InvalidURL"),  # http.client's own check
    ],
)
def test_a_library_url_that_cannot_be_sent_fails_its_attempts_not_the_run(
    make_sim: Any,
    tmp_path: Path,
    receiver: Receiver,
    secret_file: Path,
    caplog: pytest.LogCaptureFixture,
    url: str,
    problem: str,
) -> None:
    # The library takes the URL as given (the CLI refuses these): each attempt fails, the
    # events wait, the run is ok.
    sim = make_sim(seed=31, projects=1, days=1, ops_per_project_per_day=6)
    url = url.format(receiver=receiver.url.partition("/hooks")[0])
    data = tmp_path / "data"
    with caplog.at_level(logging.WARNING, logger="opsaudit.events"):
        summary = sync_events(
            sim,
            data,
            backfill=True,
            webhook_url=url,
            webhook_key=read_webhook_secret(secret_file),
            webhook_attempts=2,
        )
    expected = versions_after(data, set())
    assert (summary.outcome, summary.exit_code) == ("ok", 0)
    assert summary.events_delivered == 0 and summary.events_pending == len(expected) > 0
    assert receiver.attempts == []
    shown = url.partition("/hooks")[0] + "/…"  # scheme://host:port alone (its path too)
    warnings = [r.getMessage() for r in caplog.records if r.name == "opsaudit.events"]
    assert warnings == [f"webhook {shown}: {problem} after 2 attempt(s){WAIT}"]


_ANSWER = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"


@contextlib.contextmanager
def _trickling_receiver() -> Iterator[tuple[str, list[tuple[str, int, float]]]]:
    """A receiver that answers 200 one byte every 0.1 s (each read of the sender's socket
    succeeds well within its timeout); yields its URL and, per request, (webhook-id, bytes of
    the answer sent before the sender closed the connection, seconds from the request's end
    to then)."""
    server = socket.create_server(("127.0.0.1", 0))
    seen: list[tuple[str, int, float]] = []

    def answer(conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                data += conn.recv(65536)
            head, _, body = data.partition(b"\r\n\r\n")
            match = re.search(rb"(?i)content-length: *(\d+)", head)
            event = re.search(rb"(?i)webhook-id: *(\S+)", head)
            assert match and event
            while len(body) < int(match[1]):
                body += conn.recv(65536)
            start = time.monotonic()
            conn.settimeout(0.1)  # the pace of the answer, and how soon a close is seen
            sent = 0
            with contextlib.suppress(OSError):
                for byte in _ANSWER:
                    conn.sendall(bytes([byte]))
                    sent += 1
                    with contextlib.suppress(TimeoutError):
                        if conn.recv(1) == b"":
                            break  # the sender closed its end
            seen.append((event[1].decode(), sent, time.monotonic() - start))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.getsockname()[1]}/h", seen
    finally:
        server.close()


def test_webhook_timeout_bounds_a_whole_attempt_not_each_read(
    make_sim: Any, tmp_path: Path, secret_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sim = make_sim(seed=32, projects=1, days=1, ops_per_project_per_day=4)
    data = tmp_path / "data"
    with _trickling_receiver() as (url, seen), caplog.at_level(logging.WARNING):
        summary = sync_events(
            sim,
            data,
            backfill=True,
            webhook_url=url,
            webhook_key=read_webhook_secret(secret_file),
            webhook_timeout=0.5,
            webhook_attempts=2,
            webhook_lanes=1,  # one event in flight: the first one's two attempts, then stop
        )
        time.sleep(0.3)  # the receiver sees the last close
    expected = versions_after(data, set())
    assert summary.outcome == "ok" and summary.events_delivered == 0
    assert summary.events_pending == len(expected) > 0
    # One event of this run, attempted twice, each time closed before the answer ended.
    assert seen[0][0] in expected
    assert [(event_id, sent < len(_ANSWER)) for event_id, sent, _ in seen] == [
        (seen[0][0], True),
        (seen[0][0], True),
    ]
    # Each attempt ended at its deadline (0.5 s, less what sending the request took), long
    # before the answer would have (3.8 s).
    assert all(0.2 < seconds < 1.2 for _, _, seconds in seen), seen
    warnings = [r.getMessage() for r in caplog.records if r.name == "opsaudit.events"]
    shown = url.rpartition("/")[0] + "/…"
    assert warnings == [f"webhook {shown}: no answer within 0.5s after 2 attempt(s){WAIT}"]


@pytest.mark.parametrize(
    ("url", "host", "port"),
    [
        ("http://[::1]/hooks", "::1", 80),
        ("https://[2001:db8::1]/hooks", "2001:db8::1", 443),
        ("http://[::1]:8080/hooks", "::1", 8080),
        ("https://hooks.example/in", "hooks.example", 443),
    ],
)
def test_a_url_without_a_port_is_sent_to_its_schemes_port(url: str, host: str, port: int) -> None:
    # http.client, given no port, read an IPv6 literal's last group as one: "[::1]" was sent
    # to host ":" port 1, every attempt.
    from exporter.events.config import EventsConfig
    from exporter.events.delivery import _Webhook

    webhook = _Webhook(EventsConfig(webhook_url=url, webhook_key=b"k"))
    try:
        connection = webhook._connection()
        assert (connection.host, connection.port) == (host, port)
    finally:
        webhook.close()


def test_webhook_timeout_bounds_the_name_lookup_too(
    make_sim: Any,
    tmp_path: Path,
    secret_file: Path,
    receiver: Receiver,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """getaddrinfo has no timeout: a resolver that hangs held each attempt as long as it did
    (here 20 s), past --webhook-timeout. A name that resolves still gets its events."""
    sim = make_sim(seed=34, projects=1, days=1, ops_per_project_per_day=4)
    lookup, release = socket.getaddrinfo, threading.Event()
    port = receiver.url.split(":")[2].split("/")[0]

    def resolver(host: Any, *args: Any, **kwargs: Any) -> Any:
        if host == "hangs.invalid":
            release.wait(20)
            raise socket.gaierror(socket.EAI_AGAIN, "Temporary failure in name resolution")
        return lookup("127.0.0.1" if host == "answers.invalid" else host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolver)
    url = f"http://hangs.invalid:{port}/hooks"
    key = read_webhook_secret(secret_file)
    try:
        with caplog.at_level(logging.WARNING):
            started = time.monotonic()
            summary = sync_events(
                sim,
                tmp_path / "data",
                backfill=True,
                webhook_url=url,
                webhook_key=key,
                webhook_timeout=0.5,
                webhook_attempts=2,
            )
            took = time.monotonic() - started
    finally:
        release.set()
    expected = versions_after(tmp_path / "data", set())
    assert (summary.outcome, summary.events_delivered) == ("ok", 0)
    assert summary.events_pending == len(expected) > 0
    assert took < 8, took  # two attempts of 0.5 s each and a sync; 40 s without the bound
    warnings = [r.getMessage() for r in caplog.records if r.name == "opsaudit.events"]
    shown = url.rpartition("/")[0] + "/…"
    assert warnings == [f"webhook {shown}: no answer within 0.5s after 2 attempt(s){WAIT}"]
    assert receiver.attempts == []
    # The lookup is bounded, not broken: a name that answers gets every event.
    again = sync_events(
        sim,
        tmp_path / "data",
        webhook_url=f"http://answers.invalid:{port}/hooks",
        webhook_key=key,
        webhook_timeout=0.5,
    )
    assert (again.events_pending, receiver.ids()) == (0, set(expected))


def test_acknowledgements_are_saved_while_the_webhook_delivers(
    make_sim: Any, tmp_path: Path, secret_file: Path, receiver: Receiver
) -> None:
    """Saved as they come, not once the delivery window (whole batches of 2,000 events or more)
    is through: a run killed mid-window resent every event of it, now what its last 0.5 s
    took."""
    from exporter.events.config import read_backlog
    from exporter.store.state import StateDB

    sim = make_sim(seed=35, projects=2, days=1, ops_per_project_per_day=60)
    data = tmp_path / "data"
    receiver.hang_at, receiver.hang_seconds = 41, 3.0  # 40 taken, then the 41st hangs 3 s
    done: list[Any] = []
    run = threading.Thread(
        target=lambda: done.append(
            sync_events(
                sim,
                data,
                backfill=True,
                webhook_url=receiver.url,
                webhook_key=read_webhook_secret(secret_file),
                webhook_lanes=1,
            )
        )
    )
    run.start()
    try:
        deadline = time.monotonic() + 30
        while len(receiver.attempts) < 41 and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.2)  # the hanging attempt holds the window open
        state = StateDB(data / "state.sqlite", read_only=True)
        try:
            during = read_backlog(state)
        finally:
            state.close()
    finally:
        run.join()
    total = len(versions_after(data, set()))
    assert total > 41 and len(receiver.received) == total
    assert (during.pending["webhook"], during.delivered["webhook"]) == (total - 40, 40)
    assert (done[0].events_pending, done[0].events_delivered) == (0, total)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_stops_the_webhooks_delivery(
    make_sim: Any, tmp_path: Path, secret_file: Path, receiver: Receiver, signum: int, code: int
) -> None:
    """SIGTERM (or Ctrl-C) while the webhook delivered a backlog: the sync said "stopping" and
    went on POSTing every event, 19 s of them at a slow receiver (and `systemctl stop` waited
    for its SIGKILL where the receiver was down), then exited 0. It stops at once, the rest
    waiting in the outbox for the next run, which delivers them."""
    sim = make_sim(seed=36, projects=2, days=1, ops_per_project_per_day=60)
    data = tmp_path / "data"
    receiver.slow_seconds = 0.2
    env = {**os.environ, "NEON_API_KEY": sim.personal_key}
    sync = [
        sys.executable,
        "-m",
        "exporter",
        "sync",
        "--data-dir",
        str(data),
        "--base-url",
        sim.base_url,
        "--max-rps",
        "0",
        "--webhook",
        receiver.url,
        "--webhook-secret-file",
        str(secret_file),
        "--events-backfill",
    ]
    proc = subprocess.Popen(
        sync, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        deadline = time.monotonic() + 60
        while len(receiver.attempts) < 3 and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        proc.send_signal(signum)
        signalled, at_signal = time.monotonic(), len(receiver.attempts)
        out, err = proc.communicate(timeout=60)
        elapsed = time.monotonic() - signalled
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    total = len(versions_after(data, set()))
    assert (proc.returncode, total > 20) == (code, True), out + err
    # (Well under 1 s on a quiet box; CI runs the suite beside the mutants: load 8 and more.)
    assert elapsed < 6.0, f"{elapsed:.1f}s from the signal to the exit"
    assert len(receiver.attempts) - at_signal <= 4, (at_signal, len(receiver.attempts))  # lanes
    assert out.startswith("sync interrupted: ") and " waiting for the next run" in out, out
    receiver.slow_seconds = 0.0
    again = subprocess.run(sync, env=env, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stdout + again.stderr
    assert receiver.ids() == set(versions_after(data, set()))


def test_a_webhook_urls_path_token_is_never_shown(
    make_sim: Any, tmp_path: Path, secret_file: Path, receiver: Receiver
) -> None:
    """Real webhook URLs carry their token in the path (Slack's /services/T/B/TOKEN, Discord's
    /api/webhooks/ID/TOKEN): the warnings named the URL with its path, token and all, on
    stderr and in every log a cron line keeps. Messages name scheme://host:port/… alone;
    through the command line, a refused connection, an error answer, a redirect and a
    timeout, in the text and the JSON log, `status`, `check` and the metrics file."""
    from .conftest import closed_port_url

    sim = make_sim(seed=38, projects=1, days=1, ops_per_project_per_day=10)
    data, prom = tmp_path / "data", tmp_path / "m.prom"
    token = "/services/T0K3NTEAM/B0K3NBOT/ZZt0k3nZZ"
    up = receiver.url.partition("/hooks")[0]  # http://127.0.0.1:PORT
    down = closed_port_url().partition("/hooks")[0]
    receiver.hang_seconds = 1.0
    env = {**os.environ, "NEON_API_KEY": sim.personal_key, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "exporter"]
    sync = [
        *base,
        "sync",
        "--data-dir",
        str(data),
        "--base-url",
        sim.base_url,
        "--max-rps",
        "0",
        "--events-backfill",
        "--webhook-secret-file",
        str(secret_file),
        "--webhook-attempts",
        "2",
        "--webhook-timeout",
        "0.3",
        "--metrics-file",
        str(prom),
    ]
    outputs: list[str] = []
    # (the receiver's mode, its URL, the log's options, what the warning says)
    runs = [
        ("ok", down, ["-vv"], "ConnectionRefusedError"),
        ("fail", up, ["-vv"], "HTTP 500"),
        ("redirect", up, ["-vv", "--log-format", "json"], "HTTP 301, a redirect"),
        ("hang", up, ["-vv"], "no answer within 0.3s"),
        ("ok", up + "/", ["-vv"], None),
    ]
    for mode, at, logging_options, problem in runs:
        receiver.mode = mode
        url = at.rstrip("/") + token + "?token=s3cr3t-query"
        run = subprocess.run(
            [*sync, *logging_options, "--webhook", url],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stdout + run.stderr
        outputs += [run.stdout, run.stderr]
        if problem is not None:
            said = f"webhook {at.rstrip('/')}/…: {problem}"
            assert said in run.stderr, run.stderr
            if "json" in logging_options:
                assert orjson.loads(run.stdout)["events_pending"] > 0
            else:
                assert "waiting for the next run" in run.stdout
    assert receiver.received and all(r.valid for r in receiver.received)
    for command in ("status", "check"):
        done = subprocess.run(
            [*base, command, "--data-dir", str(data)], env=env, capture_output=True, text=True
        )
        assert done.returncode in (0, 8), done.stdout + done.stderr
        outputs += [done.stdout, done.stderr]
    files = [p for p in tmp_path.rglob("*") if p.is_file() and p != secret_file]
    assert prom in files and data / "state.sqlite" in files
    texts = [*(o.encode() for o in outputs), *(p.read_bytes() for p in files)]
    for text in texts:
        for secret in (b"0K3N", b"t0k3n", b"s3cr3t", b"/services"):
            assert secret not in text, (secret, text[:2000])


@pytest.mark.parametrize(
    ("url", "shown", "host"),
    [
        ("https://hooks.example/services/abc@TOKEN", "https://hooks.example/…", "hooks.example"),
        ("https://u:pw@hooks.example:8443/p@TOKEN?q=1", "https://hooks.example:8443/…", None),
        ("https://hooks.example/x?to=a@TOKEN", "https://hooks.example/…", "hooks.example"),
        ("https://u:TOP/SECRET@hooks.example/h", "https://u/…", "u"),
    ],
)
def test_an_at_sign_after_a_webhook_urls_host_is_no_userinfo(
    url: str, shown: str, host: str | None
) -> None:
    """`safe_url` took everything up to the last "@" before the query for the userinfo: a
    path's "@" (`/services/abc@TOKEN`) made it show "https://TOKEN/…", the summary "delivered
    to the webhook at TOKEN". The userinfo ends within the authority."""
    from exporter.events.webhook import safe_host, safe_url

    assert safe_url(url) == shown
    assert safe_host(url) == (host or "hooks.example:8443")
    assert not {"TOKEN", "TOP", "SECRET", "pw"} & set(re.split(r"[/:.@…]+", safe_url(url)))


def test_a_receivers_large_answer_is_not_read_into_memory(
    make_sim: Any, tmp_path: Path, secret_file: Path
) -> None:
    """A receiver answering 2xx with a large body (a URL that serves a download, a proxy's
    stream) had each lane read the whole of it into memory: 4 lanes of 400 MiB answers held the
    sync at 1.1 GiB RSS, and every event spent the transfer. The answer's body is read up to a
    bound; the rest is left unread and the connection closed."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    body_size, chunk = 64 * 2**20, b"x" * 2**20
    sent: list[int] = []  # per answer, the bytes the sender took before it hung up
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", "0")))
            self.send_response(200)
            self.send_header("content-length", str(body_size))
            self.end_headers()
            n = 0
            try:
                while n < body_size:
                    self.wfile.write(chunk)
                    n += len(chunk)
            except OSError:
                self.close_connection = True
            with lock:
                sent.append(n)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sim = make_sim(seed=36, projects=1, days=1, ops_per_project_per_day=12)
        result = sync_events(
            sim,
            tmp_path / "data",
            backfill=True,
            webhook_url=f"http://127.0.0.1:{server.server_address[1]}/hook",
            webhook_key=read_webhook_secret(secret_file),
        )
        deadline = time.monotonic() + 10
        while len(sent) < result.events_delivered and time.monotonic() < deadline:
            time.sleep(0.05)  # the handlers see the hang-up
    finally:
        server.shutdown()
        server.server_close()
    total = len(versions_after(tmp_path / "data", set()))
    assert total > 0
    assert (result.events_pending, result.events_delivered) == (0, total)  # 2xx: taken
    assert len(sent) == total and max(sent) < 32 * 2**20, sent
