"""400 and 404 answers, with JSON error bodies and the request id header."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import api
from .test_auth import _assert_error


@pytest.mark.parametrize("limit", ["0", "1001", "-1", "ten", ""])
def test_bad_operation_limit_is_400(make_sim: Any, limit: str) -> None:
    sim = make_sim(seed=1, projects=1)
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        r = client.get(f"/projects/{pid}/operations", params={"limit": limit})
    _assert_error(r, 400)


@pytest.mark.parametrize("limit", ["0", "401", "x"])
def test_bad_project_limit_is_400(make_sim: Any, limit: str) -> None:
    sim = make_sim(seed=1, projects=1)
    with api(sim, sim.personal_key) as client:
        r = client.get("/projects", params={"limit": limit, "org_id": sim.org_ids[0]})
    _assert_error(r, 400)


@pytest.mark.parametrize(
    "cursor", ["yesterday", "2025-01-16", "2025-01-16T21:02:04", "2025-13-16T21:02:04Z", ""]
)
def test_bad_cursor_is_400(make_sim: Any, cursor: str) -> None:
    sim = make_sim(seed=1, projects=1)
    pid = sim.project_ids()[0]
    with api(sim, sim.personal_key) as client:
        r = client.get(f"/projects/{pid}/operations", params={"limit": 5, "cursor": cursor})
    _assert_error(r, 400)


def test_unknown_project_and_operation_are_404(make_sim: Any) -> None:
    sim = make_sim(seed=1, projects=2, orgs=1)
    a, b = sim.project_ids()[:2]
    op_of_b = next(iter(sim.ground_truth([b])))
    with api(sim, sim.personal_key) as client:
        _assert_error(client.get("/projects/no-such-project-1/operations"), 404)
        _assert_error(client.get("/projects/no-such-project-1/operations/x"), 404)
        _assert_error(client.get(f"/projects/{a}/operations/00000000-0000-4000-8000-0000"), 404)
        _assert_error(client.get(f"/projects/{a}/operations/{op_of_b}"), 404)  # wrong project
        r = client.get(f"/projects/{b}/operations/{op_of_b}")
        assert r.json() == {"operation": sim.ground_truth([b])[op_of_b]}
        _assert_error(client.get("/branches"), 404)
        _assert_error(client.post("/projects"), 405)
        sim.delete_project(a)
        _assert_error(client.get(f"/projects/{a}/operations"), 404)
        assert a not in [
            p["id"]
            for p in client.get("/projects", params={"org_id": sim.org_ids[0]}).json()["projects"]
        ]
    assert a not in sim.project_ids()
    assert all(o["project_id"] != a for o in sim.ground_truth().values())
