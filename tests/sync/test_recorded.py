"""The exporter against bodies recorded from the real API (tests/assets/recorded-responses.json)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

import exporter
from exporter.engine.sync import SyncConfig, sync

from .conftest import read_versions

RECORDED = json.loads(
    (Path(__file__).parents[1] / "assets" / "recorded-responses.json").read_text()
)
KEY = "recorded-test-key-0123456789"
# Not recorded (the cassettes have no listing of branches or endpoints): the recorded project's
# branch and compute in the shape of the OpenAPI document's Branch and Endpoint.
_BRANCHES = json.dumps(
    {
        "branches": [
            {
                "id": "br-yellow-dawn-a5qftt8g",
                "project_id": "solitary-cell-58208823",
                "name": "main",
                "current_state": "ready",
                "logical_size": 30785536,
                "creation_source": "console",
                "primary": True,
                "default": True,
                "protected": False,
                "cpu_used_sec": 0,
                "created_at": "2025-01-16T21:02:04Z",
                "updated_at": "2025-01-16T21:02:05Z",
                "created_by": {"name": "pytest", "image": ""},
            }
        ],
        "annotations": {},
    }
)
_ENDPOINTS = json.dumps(
    {
        "endpoints": [
            {
                "host": "ep-lingering-surf-a5926aiu.us-east-2.aws.neon.tech",
                "id": "ep-lingering-surf-a5926aiu",
                "project_id": "solitary-cell-58208823",
                "branch_id": "br-yellow-dawn-a5qftt8g",
                "autoscaling_limit_min_cu": 0.25,
                "autoscaling_limit_max_cu": 0.25,
                "region_id": "aws-us-east-2",
                "type": "read_write",
                "current_state": "init",
                "settings": {},
                "pooler_enabled": False,
                "pooler_mode": "transaction",
                "disabled": False,
                "passwordless_access": True,
                "creation_source": "console",
                "created_at": "2025-01-16T21:02:04Z",
                "updated_at": "2025-01-16T21:02:04Z",
                "proxy_host": "us-east-2.aws.neon.tech",
                "suspend_timeout_seconds": 0,
                "provisioner": "k8s-neonvm",
            }
        ]
    }
)


class _Recorded(BaseHTTPRequestHandler):
    """Serves the recorded bodies verbatim, the listed projects' other lists empty; anything
    else is a JSON 404."""

    protocol_version = "HTTP/1.1"
    log: list[str]
    unavailable: list[str] | None = None  # ids to name in unavailable_project_ids
    operations: str | None = None  # the first operations page instead of the recorded one

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        self.server.log.append(self.path)  # type: ignore[attr-defined]
        if self.headers.get("Authorization") != f"Bearer {KEY}":
            return self._send(401, '{"code":"","message":"authentication required"}')
        path = url.path.removeprefix("/api/v2")
        if path == "/projects":
            body = RECORDED["get_projects"] if "cursor" not in query else '{"projects":[]}'
            unavailable = type(self).unavailable
            if unavailable and "cursor" not in query:
                listing = json.loads(body)
                listing["unavailable_project_ids"] = unavailable
                body = json.dumps(listing)
            return self._send(200, body)
        if path == "/projects/solitary-cell-58208823/operations":
            if "cursor" in query:
                return self._send(200, '{"operations":[]}')
            return self._send(
                200, type(self).operations or RECORDED["get_operations_solitary_cell"]
            )
        if path == "/projects/solitary-cell-58208823/branches":
            return self._send(200, _BRANCHES)
        if path == "/projects/solitary-cell-58208823/endpoints":
            return self._send(200, _ENDPOINTS)
        if (
            path
            == "/projects/solitary-cell-58208823/operations/d6ad21e4-725d-493f-a495-43867ad88d09"
        ):
            return self._send(200, RECORDED["get_operation_d6ad21e4"])
        listed = json.loads(RECORDED["get_projects"])["projects"]
        for project in listed:  # the listing's projects, with nothing recorded: empty
            for kind in ("operations", "branches", "endpoints"):
                if path == f"/projects/{project['id']}/{kind}":
                    return self._send(200, json.dumps({kind: []}))
        return self._send(404, '{"code":"","message":"not found"}')

    def _send(self, status: int, body: str) -> None:
        data = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def recorded_server() -> Iterator[tuple[str, list[str]]]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorded)
    server.log = []  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/api/v2", server.log  # type: ignore[attr-defined]
    server.shutdown()
    server.server_close()


def test_recorded_operations_page_is_stored_exactly(
    recorded_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    base_url, log = recorded_server
    summary = sync(
        SyncConfig(tmp_path, KEY, base_url, project_ids=["solitary-cell-58208823"], max_rps=None)
    )
    assert summary.outcome == "ok"
    assert summary.new_operations == 2
    rows = read_versions(tmp_path)
    by_id = {r["id"]: r for r in rows}
    start = by_id["d6ad21e4-725d-493f-a495-43867ad88d09"]
    timeline = by_id["69de6dd4-597f-404f-a095-c96702407d7b"]
    assert start["action"] == "start_compute" and start["status"] == "scheduling"
    assert start["endpoint_id"] == "ep-lingering-surf-a5926aiu"
    assert timeline["endpoint_id"] is None  # absent in the recorded body
    assert timeline["total_duration_ms"] == 31 and start["total_duration_ms"] == 0
    assert start["created_at"] == datetime(2025, 1, 16, 21, 2, 4, tzinfo=timezone.utc)
    assert str(start["created_date"]) == "2025-01-16"
    assert (
        json.loads(timeline["raw"])
        == json.loads(RECORDED["get_operations_solitary_cell"])["operations"][1]
    )
    # One page sufficed: two operations are fewer than the limit (no request past the end);
    # then the project's first walk reads its branches and endpoints (names, issue 21).
    assert [p.split("?")[0] for p in log] == [
        "/api/v2/projects/solitary-cell-58208823/operations",
        "/api/v2/projects/solitary-cell-58208823/branches",
        "/api/v2/projects/solitary-cell-58208823/endpoints",
    ]
    assert "limit=1000" in log[0] and "limit=10000" in log[1]
    con = exporter.connect(tmp_path)
    names = con.execute(
        "SELECT id, branch_name, endpoint_name FROM operations ORDER BY id"
    ).fetchall()
    assert names == [
        ("69de6dd4-597f-404f-a095-c96702407d7b", "main", None),
        ("d6ad21e4-725d-493f-a495-43867ad88d09", "main", None),
    ]
    assert con.execute("SELECT name, created_by, deleted_at FROM branches").fetchall() == [
        ("main", "pytest", None)
    ]


def test_odd_values_and_unknown_fields_never_fail_a_page(
    recorded_server: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page is decoded once into typed structs (issue 24): a value of another type than
    documented keeps its text (or NULL for a number), an unknown field is kept in `raw`, and
    the fingerprint of the odd object is stable (a second sync adds no version)."""
    page = json.loads(RECORDED["get_operations_solitary_cell"])
    odd = page["operations"][1]
    odd.update(
        action=5,
        total_duration_ms="31",
        failures_count="2",
        error={"code": "X"},
        next_generation_field={"nested": [1, None, "x"]},
    )
    del odd["status"]
    monkeypatch.setattr(_Recorded, "operations", json.dumps(page))
    base_url, _ = recorded_server
    config = SyncConfig(
        tmp_path, KEY, base_url, project_ids=["solitary-cell-58208823"], max_rps=None
    )
    assert sync(config).outcome == "ok"
    row = {r["id"]: r for r in read_versions(tmp_path)}[odd["id"]]
    assert (row["action"], row["total_duration_ms"], row["failures_count"]) == ("5", None, None)
    assert (row["error"], row["status"]) == ('{"code":"X"}', None)
    assert json.loads(row["raw"]) == odd
    again = sync(config)
    assert (again.outcome, again.new_operations, again.changed_operations) == ("ok", 0, 0)
    assert len(read_versions(tmp_path)) == 2


def test_a_fractional_number_is_null_not_truncated(
    recorded_server: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """failures_count 1.5 (or 31.0) beside integers on the same page is not an integer: NULL in
    the typed column, as when no value of the page converts, never truncated to 1; the value
    stays in `raw`. The integers of the page's other operation are kept."""
    page = json.loads(RECORDED["get_operations_solitary_cell"])
    odd = page["operations"][1]
    odd.update(failures_count=1.5, total_duration_ms=31.0)
    monkeypatch.setattr(_Recorded, "operations", json.dumps(page))
    base_url, _ = recorded_server
    config = SyncConfig(
        tmp_path, KEY, base_url, project_ids=["solitary-cell-58208823"], max_rps=None
    )
    assert sync(config).outcome == "ok"
    rows = {r["id"]: r for r in read_versions(tmp_path)}
    row = rows[odd["id"]]
    assert (row["failures_count"], row["total_duration_ms"]) == (None, None)
    assert json.loads(row["raw"])["failures_count"] == 1.5
    other = rows[page["operations"][0]["id"]]
    assert (other["failures_count"], other["total_duration_ms"]) == (0, 0)


def test_an_operation_that_is_not_an_object_fails_the_project_not_the_run(
    recorded_server: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = json.loads(RECORDED["get_operations_solitary_cell"])
    page["operations"].append(7)
    monkeypatch.setattr(_Recorded, "operations", json.dumps(page))
    base_url, log = recorded_server
    summary = sync(
        SyncConfig(tmp_path, KEY, base_url, project_ids=["solitary-cell-58208823"], max_rps=None)
    )
    assert summary.outcome == "failed"  # its only project failed (exit 5)
    assert summary.errors == {
        "solitary-cell-58208823": "project solitary-cell-58208823: malformed operations page "
        "(an item is not an object)"
    }
    assert len(log) == 1  # a malformed item is the page's fault: not retried


def test_recorded_open_operations_are_reread_and_unchanged_states_not_duplicated(
    recorded_server: tuple[str, list[str]], tmp_path: Path
) -> None:
    base_url, _ = recorded_server
    config = SyncConfig(
        tmp_path, KEY, base_url, project_ids=["solitary-cell-58208823"], max_rps=None
    )
    sync(config)
    second = sync(config)
    assert second.outcome == "ok"
    assert second.new_operations == 0 and second.changed_operations == 0
    assert len(read_versions(tmp_path)) == 2
    assert second.open_operations == 2  # scheduling and running are not terminal


def test_recorded_project_listing(recorded_server: tuple[str, list[str]], tmp_path: Path) -> None:
    import duckdb

    base_url, log = recorded_server
    summary = sync(SyncConfig(tmp_path, KEY, base_url, max_rps=None))
    assert summary.outcome == "ok"
    row = duckdb.sql(
        f"SELECT id, name, region_id, pg_version, created_at FROM read_parquet('{tmp_path}/projects/projects.parquet')"
    ).fetchall()
    assert row == [
        (
            "dry-hall-87167252",
            "pytest-5484",
            "aws-us-east-2",
            17,
            datetime(2025, 1, 16, 21, 2, 3, tzinfo=timezone.utc),
        ),
    ]
    # The largest limit the spec allows (issue 12): 10k projects list in 25 requests.
    assert any("limit=400" in p for p in log if p.startswith("/api/v2/projects?"))


def test_rfc3339_forms_parse_to_the_exact_instant() -> None:
    from exporter.core.timeutil import parse_rfc3339, timestamps_array

    forms = [
        "2025-01-16T21:02:04Z",
        "2025-01-16T21:02:04.214837Z",
        "2022-12-09T08:47:52.20417Z",
        "2025-01-16T22:02:04+01:00",
        "2025-01-16T21:02:04.2148371Z",  # 7 digits: truncated to microseconds
        "2025-01-16t16:02:04-05:00",
    ]
    got = timestamps_array(forms).to_pylist()
    expected = [
        datetime(2025, 1, 16, 21, 2, 4, tzinfo=timezone.utc),
        datetime(2025, 1, 16, 21, 2, 4, 214837, tzinfo=timezone.utc),
        datetime(2022, 12, 9, 8, 47, 52, 204170, tzinfo=timezone.utc),
        datetime(2025, 1, 16, 21, 2, 4, tzinfo=timezone.utc),
        datetime(2025, 1, 16, 21, 2, 4, 214837, tzinfo=timezone.utc),
        datetime(2025, 1, 16, 21, 2, 4, tzinfo=timezone.utc),
    ]
    assert got == expected
    assert [parse_rfc3339(f) for f in forms] == expected
    with pytest.raises(ValueError):
        parse_rfc3339("yesterday")


def test_partial_listing_syncs_unavailable_projects_by_id(
    recorded_server: tuple[str, list[str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import duckdb

    base_url, _ = recorded_server
    monkeypatch.setattr(_Recorded, "unavailable", ["solitary-cell-58208823"])
    summary = sync(SyncConfig(tmp_path, KEY, base_url, max_rps=None))
    assert summary.outcome == "ok"
    assert summary.projects_total == 2
    assert {r["project_id"] for r in read_versions(tmp_path)} == {"solitary-cell-58208823"}
    names = duckdb.sql(
        f"SELECT id, name FROM read_parquet('{tmp_path}/projects/projects.parquet') ORDER BY id"
    ).fetchall()
    assert names == [("dry-hall-87167252", "pytest-5484"), ("solitary-cell-58208823", None)]
