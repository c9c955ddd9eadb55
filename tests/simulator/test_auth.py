"""Keys: 401 for missing, invalid and revoked keys; each key kind sees exactly its scope."""

from __future__ import annotations

from typing import Any

from .conftest import api


def _assert_error(r: Any, status: int, message: str | None = None) -> None:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"code", "message", "request_id"}
    assert body["code"] == ""
    assert body["request_id"] == r.headers["X-Neon-Ret-Request-Id"]
    if message is not None:
        assert body["message"] == message


def test_missing_invalid_and_revoked_keys_get_401(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=2)
    pid = sim.project_ids()[0]
    with api(sim) as anonymous:
        _assert_error(anonymous.get("/projects"), 401, "authorization header is missing")
    with api(sim, "not-a-key") as bad:
        _assert_error(bad.get(f"/projects/{pid}/operations"), 401)
    key = sim.org_key(sim.org_ids[0])
    with api(sim, key) as client:
        assert client.get("/projects").status_code == 200
        sim.revoke_key(key)  # takes effect at once, even on an open keep-alive connection
        _assert_error(
            client.get("/projects"), 401, "authentication failed: invalid or revoked API key"
        )
    with api(sim, "Basic x") as client:
        client.headers["Authorization"] = f"Basic {sim.personal_key}"
        _assert_error(client.get("/projects"), 401)


def test_personal_key_sees_its_orgs_and_shared_projects(make_sim: Any) -> None:
    sim = make_sim(seed=2, projects=5, orgs=2, shared_projects=2)
    with api(sim, sim.personal_key) as client:
        orgs = client.get("/users/me/organizations").json()["organizations"]
        assert [o["id"] for o in orgs] == sim.org_ids
        assert all(
            set(o) == {"id", "name", "handle", "plan", "created_at", "updated_at", "managed_by"}
            for o in orgs
        )
        _assert_error(
            client.get("/projects"),
            400,
            "org_id is required, you can find it on your organization settings page",
        )
        listed: list[str] = []
        for org in sim.org_ids:
            projects = client.get("/projects", params={"org_id": org}).json()["projects"]
            assert all(p["org_id"] == org for p in projects)
            listed += [p["id"] for p in projects]
        shared = [p["id"] for p in client.get("/projects/shared").json()["projects"]]
        assert len(listed) == 5 and len(shared) == 2
        assert listed + shared == sim.project_ids()
        for pid in shared:  # operations of shared projects are readable with the personal key
            assert client.get(f"/projects/{pid}/operations", params={"limit": 1}).status_code == 200
        foreign = sim.world.foreign_org
        _assert_error(client.get("/projects", params={"org_id": foreign}), 403)


def test_org_key_sees_exactly_its_org(make_sim: Any) -> None:
    sim = make_sim(seed=3, projects=6, orgs=2)
    org, other = sim.org_ids
    with api(sim, sim.org_key(org)) as client:
        ids = [p["id"] for p in client.get("/projects", params={"limit": 100}).json()["projects"]]
        assert ids == sim.project_ids(org) and len(ids) == 3
        same = client.get("/projects", params={"org_id": org}).json()["projects"]
        assert [p["id"] for p in same] == ids
        _assert_error(client.get("/projects", params={"org_id": other}), 403)
        _assert_error(client.get("/users/me/organizations"), 403)
        _assert_error(client.get("/projects/shared"), 403)
        for pid in sim.project_ids(other) + sim.project_ids(sim.world.foreign_org):
            _assert_error(client.get(f"/projects/{pid}/operations"), 404)
        assert client.get(f"/projects/{ids[0]}/operations").status_code == 200


def test_project_key_sees_one_project(make_sim: Any) -> None:
    sim = make_sim(seed=4, projects=4, orgs=1)
    pid, *others = sim.project_ids()
    with api(sim, sim.project_key(pid)) as client:
        assert [p["id"] for p in client.get("/projects").json()["projects"]] == [pid]
        _assert_error(client.get("/users/me/organizations"), 403)
        body = client.get(f"/projects/{pid}/operations").json()
        assert {o["id"] for o in body["operations"]} == set(sim.ground_truth([pid]))
        op_id = body["operations"][0]["id"]
        assert client.get(f"/projects/{pid}/operations/{op_id}").status_code == 200
        for other in others:
            _assert_error(client.get(f"/projects/{other}/operations"), 404)
            _assert_error(client.get(f"/projects/{other}"), 404)
        assert client.get(f"/projects/{pid}").json()["project"]["id"] == pid
