"""The branches and endpoints listings (issue 21): the platform's fields, paging by
`pagination.next`, unnamed computes, renames and deletions, counters that move between reads."""

from __future__ import annotations

from typing import Any

from .conftest import api

_BRANCH_TRACKED = ("name", "parent_id", "default", "protected", "expires_at")
_ENDPOINT_TRACKED = (
    "name",
    "branch_id",
    "type",
    "autoscaling_limit_min_cu",
    "autoscaling_limit_max_cu",
    "suspend_timeout_seconds",
    "disabled",
    "pooler_enabled",
)


def _all_branches(client: Any, pid: str, limit: int | None) -> tuple[list[dict[str, Any]], int]:
    params: dict[str, Any] = {} if limit is None else {"limit": limit}
    out: list[dict[str, Any]] = []
    pages = 0
    while True:
        r = client.get(f"/projects/{pid}/branches", params=params)
        assert r.status_code == 200, r.text
        body = r.json()
        pages += 1
        out += body["branches"]
        nxt = (body.get("pagination") or {}).get("next")
        if not nxt:
            return out, pages
        params = {**params, "cursor": nxt}


def test_branches_page_by_next_cursor_even_without_limit(make_sim: Any) -> None:
    sim = make_sim(seed=5, projects=1, shared_projects=0, days=3, branches_page=2)
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        everything, pages = _all_branches(client, pid, 10_000)
        without_limit, pages_without = _all_branches(client, pid, None)
        one_each, pages_one = _all_branches(client, pid, 1)
    ids = [b["id"] for b in everything]
    assert ids == sorted(ids) and len(ids) == len(set(ids)) >= 3
    assert [b["id"] for b in without_limit] == ids == [b["id"] for b in one_each]
    assert pages == pages_without == -(-len(ids) // 2)
    assert pages_one == len(ids)
    assert [b["default"] for b in everything].count(True) == 1


def test_listing_fields_unnamed_computes_and_moving_counters(make_sim: Any) -> None:
    sim = make_sim(seed=6, projects=1, shared_projects=0, days=5)
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        first = client.get(f"/projects/{pid}/endpoints").json()["endpoints"]
        second = client.get(f"/projects/{pid}/endpoints").json()["endpoints"]
        b1 = client.get(f"/projects/{pid}/branches", params={"limit": 10_000}).json()
        b2 = client.get(f"/projects/{pid}/branches", params={"limit": 10_000}).json()
    assert "pagination" not in b1
    assert any("name" not in e for e in first) and any("name" in e for e in first)
    for e in first:
        assert {"id", "project_id", "branch_id", "type", "current_state", "created_at"} <= set(e)
    tracked = [{k: e.get(k) for k in _ENDPOINT_TRACKED} for e in first]
    assert tracked == [{k: e.get(k) for k in _ENDPOINT_TRACKED} for e in second]
    assert [e["current_state"] for e in first] != [e["current_state"] for e in second]
    branches1, branches2 = b1["branches"], b2["branches"]
    assert [{k: b.get(k) for k in _BRANCH_TRACKED} for b in branches1] == [
        {k: b.get(k) for k in _BRANCH_TRACKED} for b in branches2
    ]
    assert [b["logical_size"] for b in branches1] != [b["logical_size"] for b in branches2]
    assert [b["cpu_used_sec"] for b in branches1] != [b["cpu_used_sec"] for b in branches2]
    assert all("created_by" not in b or isinstance(b["created_by"], dict) for b in branches1)


def test_history_has_deleted_branches_and_controls_rename_and_delete(make_sim: Any) -> None:
    sim = make_sim(seed=7, projects=3, shared_projects=0, days=7)
    deleted_seen = False
    for pid in sim.project_ids():
        listed = {b["id"] for b in sim.branches(pid)}
        named = {o.get("branch_id") for o in sim.ground_truth([pid]).values()} - {None}
        deleted_seen |= bool(named - listed)
    assert deleted_seen  # old operations name branches that the listing no longer has
    pid = sim.project_ids()[0]
    branch_id, endpoint_id, ops = sim.add_branch(pid, "preview/pr-42")
    truth = sim.ground_truth([pid])
    assert [truth[o]["action"] for o in ops] == ["create_branch", "start_compute"]
    assert truth[ops[1]]["endpoint_id"] == endpoint_id
    assert {b["id"]: b["name"] for b in sim.branches(pid)}[branch_id] == "preview/pr-42"
    sim.change_branch(branch_id, name="preview/pr-43")
    assert {b["id"]: b["name"] for b in sim.branches(pid)}[branch_id] == "preview/pr-43"
    sim.change_endpoint(endpoint_id, name=None)
    assert "name" not in {e["id"]: e for e in sim.endpoints(pid)}[endpoint_id]
    sim.delete_branch(branch_id)
    assert branch_id not in {b["id"] for b in sim.branches(pid)}
    assert endpoint_id not in {e["id"] for e in sim.endpoints(pid)}
    with api(sim, sim.personal_key) as client:
        assert client.get("/projects/nope-1/branches").status_code == 404
    assert sim.stats()["by_route"]["GET /projects/{project_id}/branches"] == 1
