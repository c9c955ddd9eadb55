"""The project listing has the recorded real listing's shape: `applications` and `integrations`
maps beside `projects` and `pagination`, on every kind of listing (issue 15)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from exporter.simulator import Simulator

from .conftest import api

RECORDED = json.loads(
    json.loads((Path(__file__).parents[1] / "assets" / "recorded-responses.json").read_text())[
        "get_projects"
    ]
)


def listing(sim: Simulator, kind: str) -> tuple[str, dict[str, Any], str]:
    """(key, params, path) of one kind of listing."""
    org = sim.org_ids[0]
    if kind == "personal key, org_id":
        return sim.personal_key, {"org_id": org}, "/projects"
    if kind == "organization key":
        return sim.org_key(org), {}, "/projects"
    if kind == "project key":
        return sim.project_key(sim.project_ids(org)[0]), {}, "/projects"
    return sim.personal_key, {}, "/projects/shared"


@pytest.mark.parametrize(
    "kind", ["personal key, org_id", "organization key", "project key", "shared projects"]
)
def test_listing_carries_applications_and_integrations(make_sim: Any, kind: str) -> None:
    sim = make_sim(seed=3, projects=4, orgs=1, shared_projects=2, ops_per_project_per_day=5)
    key, params, path = listing(sim, kind)
    with api(sim, key) as client:
        body = client.get(path, params=params).json()
        assert (
            list(body)
            == list(RECORDED)
            == [
                "projects",
                "pagination",
                "applications",
                "integrations",
            ]
        )
        assert (
            (body["applications"], body["integrations"])
            == (
                RECORDED["applications"],
                RECORDED["integrations"],
            )
            == ({}, {})
        )
        assert body["pagination"] == {"cursor": body["projects"][-1]["id"]}
        # Every field of the recorded project is there (the simulator adds org_id and locked).
        assert set(RECORDED["projects"][0]) <= set(body["projects"][0])
        # A page past the end: no pagination (PRODUCT.md), and the maps the OpenAPI document
        # requires on every answer (issue 19).
        after = client.get(path, params=params | {"cursor": body["projects"][-1]["id"]})
        assert after.json() == {"projects": [], "applications": {}, "integrations": {}}


def test_listing_of_an_organization_without_projects_carries_the_maps(make_sim: Any) -> None:
    """Issue 19: the listing with org_id of an organization that has no project (a new user's
    first hour) was `{"projects": []}`, without the maps the OpenAPI document requires."""
    sim = make_sim(seed=4, projects=0, orgs=1, shared_projects=0)
    with api(sim, sim.personal_key) as client:
        answer = client.get("/projects", params={"org_id": sim.org_ids[0], "limit": 100})
        assert answer.json() == {"projects": [], "applications": {}, "integrations": {}}
