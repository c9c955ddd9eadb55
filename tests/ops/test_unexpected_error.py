"""Issue 19, finding 4: an error that is not one of opsaudit's own exits 5 with one line; its
traceback goes to the log at `-v` and into the JSON log, never to a user without them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

KEY = "unexpected-test-key-0123456789"
# A listing the state cannot store: `region_id` is an object (seen on a proxy that wrapped
# fields). It crashes the sync with an error of no opsaudit kind.
LISTING = {
    "projects": [
        {
            "id": "odd-region-1",
            "name": "odd",
            "region_id": {"name": "aws-us-east-2"},
            "created_at": "2025-01-16T21:02:03Z",
            "updated_at": "2025-01-16T21:02:03Z",
        }
    ],
    "pagination": {},
    "applications": {},
    "integrations": {},
}


class _Odd(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        path = self.path.split("?")[0].removeprefix("/api/v2")
        if path == "/users/me/organizations":
            body = {"organizations": [{"id": "org-odd", "name": "odd"}]}
        elif path == "/projects":
            body = LISTING
        elif path == "/projects/shared":
            body = {"projects": [], "pagination": {}}
        else:
            body = {"operations": [], "pagination": {}}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def odd_api() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Odd)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v2/"
    server.shutdown()
    server.server_close()


def _sync(base_url: str, data_dir: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NEON_API_KEY": KEY}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "exporter",
            "sync",
            "--data-dir",
            str(data_dir),
            "--base-url",
            base_url,
            "--max-rps",
            "0",
            *flags,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_unexpected_error_exits_5_with_one_line(odd_api: str, tmp_path: Path) -> None:
    done = _sync(odd_api, tmp_path / "data")
    assert done.returncode == 5, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("Error: unexpected error (ProgrammingError: ")
    assert lines[0].endswith(
        "This is a bug in opsaudit: run again with -v for the traceback and report it"
    )
    assert "Traceback" not in done.stderr and KEY not in done.stderr + done.stdout


def test_the_traceback_is_in_the_log_at_v(odd_api: str, tmp_path: Path) -> None:
    done = _sync(odd_api, tmp_path / "data", "-v")
    assert done.returncode == 5
    assert "Z INFO opsaudit: unexpected error\nTraceback (most recent call last):" in done.stderr
    assert "upsert_projects" in done.stderr
    assert done.stderr.splitlines()[-1].startswith("Error: unexpected error (ProgrammingError: ")


def test_the_traceback_is_in_the_json_log(odd_api: str, tmp_path: Path) -> None:
    done = _sync(odd_api, tmp_path / "data", "--log-format", "json")
    assert done.returncode == 5
    *log_lines, last = done.stderr.splitlines()
    entries = [json.loads(line) for line in log_lines]
    [crash] = [e for e in entries if e["message"] == "unexpected error"]
    assert (crash["level"], crash["logger"]) == ("info", "opsaudit")
    assert crash["traceback"].startswith("Traceback (most recent call last):")
    assert "upsert_projects" in crash["traceback"]
    assert last.startswith("Error: unexpected error (ProgrammingError: ")
