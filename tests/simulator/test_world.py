"""Determinism by seed, the operation mix, recorded shapes, and live transitions."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

from exporter.simulator import SimConfig, Simulator
from exporter.simulator._generate import BRANCH_RARE, ENDPOINT_RARE

from .conftest import api

ASSETS = Path(__file__).resolve().parents[1] / "assets" / "recorded-responses.json"
PRODUCT_ACTIONS = {
    "create_compute", "stop_compute", "delete_timeline", "tenant_ignore", "tenant_migrate",
    "replace_safekeeper", "disable_maintenance", "prepare_secondary_pageserver",
    "switch_pageserver", "detach_parent_branch", "start_reserved_compute",
    "sync_dbs_and_roles_from_compute", "import_data", "apply_schema_from_branch",
    "prewarm_replica", "promote_replica", "apply_config", "apply_storage_config",
    "check_availability", "create_branch", "create_timeline", "delete_tenant", "start_compute",
    "suspend_compute", "tenant_attach", "tenant_detach", "tenant_reattach", "timeline_archive",
    "timeline_unarchive",
}  # fmt: skip


def _bodies(sim: Simulator) -> list[bytes]:
    out = []
    with api(sim, sim.personal_key) as client:
        out.append(client.get("/users/me/organizations").content)
        for org in sim.org_ids:
            out.append(client.get("/projects", params={"org_id": org}).content)
        for pid in sim.project_ids():
            out.append(client.get(f"/projects/{pid}/operations", params={"limit": 500}).content)
    return out


def test_same_seed_same_bytes_other_seed_other_bytes(make_sim: Any) -> None:
    a = make_sim(seed=42, projects=3)
    b = make_sim(seed=42, projects=3)
    c = make_sim(seed=43, projects=3)
    assert a.personal_key == b.personal_key != c.personal_key
    assert _bodies(a) == _bodies(b)
    assert _bodies(a) != _bodies(c)
    for sim in (a, b, c):
        sim.advance(300)
        sim.advance(45.5)
        sim.add_operations(sim.project_ids()[0], 3)
    assert a.ground_truth() == b.ground_truth() != c.ground_truth()
    assert _bodies(a) == _bodies(b)


def test_operation_mix_of_a_real_account() -> None:
    sim = Simulator(SimConfig(seed=0, projects=6, days=10, ops_per_project_per_day=1000))
    ops = list(sim.ground_truth().values())
    assert 0.9 < len(ops) / (8 * 10 * 1000) < 1.1
    actions = Counter(o["action"] for o in ops)
    top = {a for a, _ in actions.most_common(3)}
    assert top == {"check_availability", "suspend_compute", "start_compute"}
    assert set(actions) >= PRODUCT_ACTIONS
    assert set(ENDPOINT_RARE + BRANCH_RARE) <= set(actions)
    assert set(actions) - PRODUCT_ACTIONS  # values nobody has listed
    statuses = Counter(o["status"] for o in ops)
    assert statuses.most_common(1)[0][0] == "finished"
    assert {"failed", "error", "cancelled", "skipped", "paused"} <= set(statuses)
    for o in ops:
        if o["action"] in ("create_branch", "create_timeline", *BRANCH_RARE):
            assert "endpoint_id" not in o
        if o["status"] in ("failed", "error"):
            assert o["error"]
        if "retry_at" in o:
            assert o["failures_count"] > 0 and "error" in o
    assert any(o["failures_count"] > 0 and o["status"] == "finished" for o in ops)
    assert sum(1 for o in ops if "trace_id" in o) > 0
    # Branch creation comes with a compute start in the same second.
    by_second = Counter((o["project_id"], o["created_at"]) for o in ops)
    assert sum(1 for n in by_second.values() if n > 1) > len(ops) / 20
    branch_ops = [o for o in ops if o["action"] == "create_branch"]
    assert all(
        any(
            x["action"] == "start_compute" and x["created_at"] == o["created_at"]
            for x in ops
            if x["project_id"] == o["project_id"] and x.get("branch_id") == o["branch_id"]
        )
        for o in branch_ops[:20]
    )
    # The newest operations may still be open.
    assert sim.world.open_ops


def _json_type(value: Any) -> str:
    return type(value).__name__


def test_bodies_have_the_recorded_shapes(default_sim: Simulator) -> None:
    recorded = json.loads(ASSETS.read_text())
    rec_ops = json.loads(recorded["get_operations_solitary_cell"])
    rec_projects = json.loads(recorded["get_projects"])
    with api(default_sim, default_sim.personal_key) as client:
        org = default_sim.org_ids[0]
        projects = client.get("/projects", params={"org_id": org}).json()
        pid = projects["projects"][0]["id"]
        ops = client.get(f"/projects/{pid}/operations", params={"limit": 1000}).json()
        one = client.get(f"/projects/{pid}/operations/{ops['operations'][0]['id']}").json()
    assert set(projects) == set(rec_projects)
    rec_p = rec_projects["projects"][0]
    for p in projects["projects"]:
        assert {k: _json_type(v) for k, v in rec_p.items()} == {k: _json_type(p[k]) for k in rec_p}
        assert p["org_id"] == org
    assert set(ops) == set(rec_ops)
    rec_types = {k: _json_type(v) for o in rec_ops["operations"] for k, v in o.items()}
    for o in ops["operations"]:
        for k, t in rec_types.items():
            if k in o:
                assert _json_type(o[k]) == t, k
        assert {"id", "project_id", "action", "status", "failures_count"} <= set(o)
        assert o["created_at"].endswith("Z") and len(o["created_at"]) == 20
        assert o["updated_at"].endswith("Z") and len(o["updated_at"]) == 20
    assert set(one) == {"operation"} and one["operation"] == ops["operations"][0]


def _watch_open(sim: Simulator, steps: int, dt: float) -> dict[str, list[dict[str, Any]]]:
    """Op id -> each distinct state seen of the ops open before each step."""
    w = sim.world
    stories: dict[str, list[dict[str, Any]]] = {}
    for _ in range(steps):
        with w.lock:
            codes = list(w.open_ops)
        sim.advance(dt)
        with w.lock:
            for code in codes:
                o = w.op_dict(w.projects[code >> 32], code & 0xFFFFFFFF)
                story = stories.setdefault(o["id"], [])
                if not story or story[-1] != o:
                    story.append(o)
    return stories


def test_live_transitions() -> None:
    sim = Simulator(SimConfig(seed=3, projects=5, days=0.1, ops_per_project_per_day=20000))
    stories = _watch_open(sim, 60, 2.0)
    statuses = {tuple(o["status"] for o in s) for s in stories.values()}
    # Consecutive duplicates are progress reported in place (duration only).
    compact = {tuple(x for j, x in enumerate(p) if j == 0 or p[j - 1] != x) for p in statuses}
    assert ("running", "failed", "running", "finished") in compact
    assert ("scheduling", "finished") in compact
    assert ("scheduling", "running", "finished") in compact
    assert ("running", "cancelling", "cancelled") in compact
    retried = 0
    for s in stories.values():
        for a, b in itertools.pairwise(s):
            if a["status"] == "running" and b["status"] == "failed":
                assert b["failures_count"] == a["failures_count"] + 1
                assert b["error"] and b["retry_at"] > b["updated_at"]
                assert b["updated_at"] > a["updated_at"] or a["updated_at"] == b["updated_at"]
                retried += 1
            if a["status"] == "failed" and b["status"] == "running":
                assert b["failures_count"] == a["failures_count"]
            assert b["total_duration_ms"] >= a["total_duration_ms"]
            assert b["updated_at"] >= a["updated_at"]
    assert retried > 10
    # Some running ops report progress without a new updated_at (PRODUCT.md).
    assert any(
        a["status"] == b["status"] == "running"
        and a["updated_at"] == b["updated_at"]
        and b["total_duration_ms"] > a["total_duration_ms"]
        for s in stories.values()
        for a, b in itertools.pairwise(s)
    )
    assert sim.operation_count() > 5 * 2000 + 100  # new arrivals kept coming


def test_add_update_and_projects(make_sim: Any) -> None:
    sim = make_sim(seed=6, projects=2, orgs=1)
    pid = sim.project_ids()[0]
    sim.advance(1)
    ids = sim.add_operations(pid, 5, action="apply_config", same_second=True)
    truth = sim.ground_truth([pid])
    assert {truth[i]["created_at"] for i in ids} == {sim.clock[:19] + "Z"}
    assert all(truth[i]["status"] == "finished" for i in ids)
    spread = sim.add_operations(pid, 3, same_second=False)
    assert len({sim.ground_truth([pid])[i]["created_at"] for i in spread}) == 3
    [op] = sim.add_operations(pid, 1, action="quantum_rebalance", status="pondering")
    sim.update_operation(op, status="failed", failures_count=2, error="boom", shiny={"a": [1]})
    sim.advance(600)  # the caller drives this op: live progression leaves it alone
    got = sim.ground_truth([pid])[op]
    assert got["status"] == "failed" and got["failures_count"] == 2 and got["error"] == "boom"
    assert got["shiny"] == {"a": [1]} and got["action"] == "quantum_rebalance"
    sim.update_operation(op, status="finished", error=None, updated_at="2030-01-01T00:00:00Z")
    got = sim.ground_truth([pid])[op]
    assert "error" not in got and got["updated_at"] == "2030-01-01T00:00:00Z"
    new = sim.add_project(name="fresh")
    assert new in sim.project_ids(sim.org_ids[0])
    first = sorted(sim.ground_truth([new]).values(), key=lambda o: o["action"])
    assert [(o["action"], o["status"]) for o in first] == [
        ("create_timeline", "running"),
        ("start_compute", "scheduling"),
    ]
    sim.start_live(tick_seconds=0.01, sim_seconds_per_tick=30)
    with api(sim, sim.personal_key) as client:
        for _ in range(20):
            assert client.get(f"/projects/{pid}/operations").status_code == 200
    sim.stop_live()
    assert sim.clock > "2025-01-16T21:10"
