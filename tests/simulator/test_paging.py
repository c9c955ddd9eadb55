"""Operation pages: newest first, every operation exactly once despite same-second ties."""

from __future__ import annotations

import re
from typing import Any

import pytest

from exporter.simulator import Simulator
from exporter.simulator._timefmt import fmt_cursor, parse_cursor_ns

from .conftest import api, walk

CURSOR = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{0,5}[1-9])?Z$")


def _ops(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [op for page in pages for op in page["operations"]]


def test_pages_of_1000_hold_every_operation_once_and_ties_straddle_boundaries(
    default_sim: Simulator,
) -> None:
    straddling = 0
    with api(default_sim, default_sim.personal_key) as client:
        for pid in default_sim.project_ids():
            pages = walk(client, pid, 1000)
            ops = _ops(pages)
            truth = default_sim.ground_truth([pid])
            assert [o["id"] for o in ops] == list(reversed(truth))  # newest first
            assert {o["id"]: o for o in ops} == truth
            for older, newer in zip(pages[1:], pages):
                if older["operations"] and (
                    older["operations"][0]["created_at"] == newer["operations"][-1]["created_at"]
                ):
                    straddling += 1
    # Same-second groups cut by a 1000-op page boundary happen in the default data.
    assert straddling >= 1


def test_small_pages_and_no_limit_agree(default_sim: Simulator) -> None:
    pid = default_sim.project_ids()[-1]
    with api(default_sim, default_sim.personal_key) as client:
        everything = _ops(walk(client, pid, None))
        assert len(everything) == len(default_sim.ground_truth([pid])) > 1000
        assert _ops(walk(client, pid, 7)) == everything
        assert _ops(walk(client, pid, 13)) == everything


def test_cursor_is_the_last_operation_microsecond_instant(default_sim: Simulator) -> None:
    pid = default_sim.project_ids()[0]
    w = default_sim.world
    p = w.by_id[pid]
    with api(default_sim, default_sim.personal_key) as client:
        body = client.get(f"/projects/{pid}/operations", params={"limit": 5}).json()
    cursor = body["pagination"]["cursor"]
    assert CURSOR.match(cursor)
    assert cursor == fmt_cursor(p.created[-5])
    assert body["operations"][-1]["created_at"] == cursor[:19] + "Z"


def test_cursor_format_drops_trailing_zeros() -> None:
    us = 1670575672_204170
    assert fmt_cursor(us) == "2022-12-09T08:47:52.20417Z"
    assert fmt_cursor(1737061324_214837) == "2025-01-16T21:02:04.214837Z"
    assert fmt_cursor(1737061324_000000) == "2025-01-16T21:02:04Z"
    assert parse_cursor_ns("2022-12-09T08:47:52.20417Z") == us * 1000
    assert parse_cursor_ns("2022-12-09T09:47:52.20417+01:00") == us * 1000


def test_next_page_is_strictly_older_than_the_cursor_instant(make_sim: Any) -> None:
    sim = make_sim(seed=2, projects=1, shared_projects=0)
    pid = sim.project_ids()[0]
    sim.advance(1)
    ids = sim.add_operations(pid, 4, same_second=True)
    p = sim.world.by_id[pid]
    second_newest = p.created[-2]
    with api(sim, sim.personal_key) as client:
        url = f"/projects/{pid}/operations"
        body = client.get(url, params={"limit": 2, "cursor": fmt_cursor(second_newest)}).json()
        assert [o["id"] for o in body["operations"]] == [ids[1], ids[0]]
        # The same instant with nanoseconds or an offset names the same point in time.
        ns_cursor = fmt_cursor(second_newest)[:-1].ljust(26, "0") + "001Z"
        again = client.get(url, params={"limit": 2, "cursor": ns_cursor}).json()
        assert [o["id"] for o in again["operations"]] == [ids[2], ids[1]]


@pytest.mark.parametrize(
    ("past_end", "expected"),
    [
        ("empty_with_pagination", {"operations": [], "pagination": {"cursor": "{cursor}"}}),
        ("empty_without_pagination", {"operations": []}),
    ],
)
def test_page_past_the_end(make_sim: Any, past_end: str, expected: dict[str, Any]) -> None:
    sim = make_sim(seed=4, projects=1, shared_projects=0, past_end=past_end)
    pid = sim.project_ids()[0]
    n = len(sim.ground_truth([pid]))
    with api(sim, sim.personal_key) as client:
        last = client.get(f"/projects/{pid}/operations", params={"limit": 1000}).json()
        assert len(last["operations"]) == n
        cursor = last["pagination"]["cursor"]  # the last non-empty page carries a cursor too
        r = client.get(f"/projects/{pid}/operations", params={"limit": 1000, "cursor": cursor})
    want = dict(expected)
    if "pagination" in want:
        want["pagination"] = {"cursor": cursor}
    assert r.json() == want


def test_project_listing_pages_by_id(make_sim: Any) -> None:
    sim = make_sim(seed=5, projects=23, orgs=1, ops_per_project_per_day=5)
    org = sim.org_ids[0]
    seen: list[str] = []
    with api(sim, sim.personal_key) as client:
        first = client.get("/projects", params={"org_id": org}).json()
        assert len(first["projects"]) == 10  # the default page
        assert set(first) == {"projects", "pagination", "applications", "integrations"}
        cursor = None
        while True:
            params: dict[str, Any] = {"org_id": org, "limit": 7}
            if cursor:
                params["cursor"] = cursor
            body = client.get("/projects", params=params).json()
            if not body["projects"]:
                assert body == {"projects": [], "applications": {}, "integrations": {}}
                break
            seen += [p["id"] for p in body["projects"]]
            assert body["pagination"]["cursor"] == seen[-1]
            cursor = seen[-1]
    assert seen == sorted(seen) == sim.project_ids(org)
    assert len(seen) == 23
