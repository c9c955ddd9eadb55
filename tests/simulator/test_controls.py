"""Test controls for issue 9: shared projects, fractional created_at, inclusive cursors and
scripted failures."""

from __future__ import annotations

from typing import Any

from exporter.core.timeutil import to_micros
from exporter.simulator._timefmt import fmt_fraction_offset, parse_seconds_us

from .conftest import api, walk


def test_add_shared_project_is_listed_as_shared_and_deletable(make_sim: Any) -> None:
    sim = make_sim(seed=3, projects=1, shared_projects=0)
    pid = sim.add_project(shared=True)
    with api(sim, sim.personal_key) as client:
        shared = client.get("/projects/shared", params={"limit": 100}).json()["projects"]
        assert [p["id"] for p in shared] == [pid]
        assert shared[0]["org_id"] == sim.world.foreign_org
        for org in sim.org_ids:
            listed = client.get("/projects", params={"org_id": org, "limit": 100}).json()
            assert pid not in {p["id"] for p in listed["projects"]}
        ops = client.get(f"/projects/{pid}/operations", params={"limit": 10}).json()
        assert {o["action"] for o in ops["operations"]} == {"create_timeline", "start_compute"}
        sim.delete_project(pid)
        after = client.get("/projects/shared", params={"limit": 100}).json()
        assert after == {"projects": [], "applications": {}, "integrations": {}}
        assert client.get(f"/projects/{pid}/operations", params={"limit": 10}).status_code == 404


def test_fraction_offset_format() -> None:
    us = parse_seconds_us("2025-01-16T21:00:08Z") + 841_000
    assert fmt_fraction_offset(us, 120) == "2025-01-16T23:00:08.841+02:00"
    assert fmt_fraction_offset(us + 5, -90) == "2025-01-16T19:30:08.841005-01:30"
    assert fmt_fraction_offset(us - 841_000, 0) == "2025-01-16T21:00:08+00:00"
    assert to_micros(fmt_fraction_offset(us, 120)) == us


def test_fractional_created_at_keeps_the_instant_and_the_order(make_sim: Any) -> None:
    sim = make_sim(seed=4, projects=1, shared_projects=0)
    pid = sim.project_ids()[0]
    sim.advance(1)
    ids = sim.add_operations(pid, 3, same_second=True)
    before = sim.ground_truth([pid])
    sim.fractional_created_at(ids[1])
    after = sim.ground_truth([pid])
    text = after[ids[1]]["created_at"]
    assert text.endswith("+02:00") and "." in text
    whole = before[ids[1]]["created_at"]
    assert whole.endswith("Z") and "." not in whole
    # The same second (whole-second neighbours), a fraction after it, listed in the same place.
    assert to_micros(whole) < to_micros(text) < to_micros(whole) + 1_000_000
    assert after[ids[0]]["created_at"] == before[ids[0]]["created_at"]
    with api(sim, sim.personal_key) as client:
        [page] = walk(client, pid, None)
        listed = [o["id"] for o in page["operations"]]
    assert listed[:3] == ids[::-1]


def test_inclusive_cursor_repeats_the_named_operation(make_sim: Any) -> None:
    for inclusive in (False, True):
        sim = make_sim(seed=5, projects=1, shared_projects=0, inclusive_cursor=inclusive)
        pid = sim.project_ids()[0]
        with api(sim, sim.personal_key) as client:
            first = client.get(f"/projects/{pid}/operations", params={"limit": 4}).json()
            cursor = first["pagination"]["cursor"]
            second = client.get(
                f"/projects/{pid}/operations", params={"limit": 4, "cursor": cursor}
            ).json()
        repeated = second["operations"][0]["id"] == first["operations"][-1]["id"]
        assert repeated is inclusive


def test_scripted_failures(make_sim: Any) -> None:
    sim = make_sim(seed=6, projects=1, shared_projects=1)
    pid = sim.project_ids(sim.org_ids[0])[0]
    op_id = next(iter(sim.ground_truth([pid])))
    sim.fail_requests("/projects/shared", 500)
    sim.fail_requests(f"/operations/{op_id}", 404, times=1, after=1)
    sim.fail_requests(f"/projects/{pid}/operations", 503, times=2)
    with api(sim, sim.personal_key) as client:
        for _ in range(3):
            r = client.get("/projects/shared", params={"limit": 10})
            assert r.status_code == 500 and r.json()["message"] == "scripted failure 500"
        url = f"/projects/{pid}/operations/{op_id}"
        assert [client.get(url).status_code for _ in range(3)] == [200, 404, 200]
        listing = f"/projects/{pid}/operations"
        codes = [client.get(listing, params={"limit": 1}).status_code for _ in range(3)]
        assert codes == [503, 503, 200]
        sim.clear_failures()
        assert client.get("/projects/shared", params={"limit": 10}).status_code == 200
    assert sim.stats()["by_status"]["500"] == 3
