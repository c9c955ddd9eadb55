"""Faults, throttling, keys and scopes: the dataset stays exact and errors are clear."""

from __future__ import annotations

import re
import sqlite3
import time
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from exporter.cli import cli
from exporter.core.model import TERMINAL_STATUSES
from exporter.simulator import Faults, RateLimits

from .conftest import (
    assert_matches_truth,
    assert_no_identical_versions,
    latest_raw,
    read_versions,
    run_sync,
)


def test_injected_faults_and_throttling_still_give_ground_truth(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=21, projects=6, days=1, ops_per_project_per_day=400)
    sim.faults = Faults(
        p_5xx=0.08, p_drop=0.05, p_slow=0.05, slow_seconds=0.05, p_truncate=0.05, seed=2
    )
    sim.rate_limits = RateLimits(
        enabled=True, per_minute=700, per_route_per_second=40, retry_after=True, time_scale=60.0
    )
    summary = run_sync(sim, tmp_path, page_size=50, concurrency=4)
    assert summary.outcome == "ok", summary.errors
    faults = sim.stats()["faults"]
    assert faults["5xx"] > 0 and faults["drop"] > 0 and faults["truncate"] > 0
    assert summary.retries > 0
    sim.advance(60)
    run_sync(sim, tmp_path, page_size=50, concurrency=4)
    sim.faults = Faults()
    run_sync(sim, tmp_path, page_size=50)
    assert_matches_truth(sim, tmp_path)
    assert_no_identical_versions(tmp_path)


def test_revoked_key_mid_sync_stops_with_auth_exit_code(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=22, projects=8, days=10, ops_per_project_per_day=400)
    key = sim.org_key(sim.org_ids[0])
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.1, seed=1)
    import threading

    def revoke_after_some_pages() -> None:
        # Revoke once the walk is under way (some pages read), not at a wall-clock guess.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if sim.stats()["by_route"].get("GET /projects/{project_id}/operations", 0) >= 3:
                break
            time.sleep(0.01)
        sim.revoke_key(key)

    timer = threading.Thread(target=revoke_after_some_pages)
    timer.start()
    result = CliRunner().invoke(
        cli,
        [
            "sync",
            "--data-dir",
            str(tmp_path),
            "--base-url",
            sim.base_url,
            "--max-rps",
            "0",
            "--concurrency",
            "1",
        ],
        env={"NEON_API_KEY": key},
    )
    timer.join()
    assert result.exit_code == 3, result.output
    assert "stopped working during the run" in result.output
    assert key not in result.output
    # Whatever was committed before the revocation is consistent and resumable with a new key.
    sim.faults = Faults()
    summary = run_sync(sim, tmp_path, key=sim.org_key(sim.org_ids[0]))
    assert summary.outcome == "ok"
    assert_matches_truth(sim, tmp_path, sim.project_ids(sim.org_ids[0]))
    assert_no_identical_versions(tmp_path)


def test_invalid_key_is_exit_3_and_never_printed(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=23, projects=1, days=1)
    secret = "napi_not-a-real-key-0123456789abcdef"
    result = CliRunner().invoke(
        cli,
        [
            "sync",
            "--data-dir",
            str(tmp_path),
            "--base-url",
            sim.base_url,
            "--log-format",
            "json",
            "-vv",
        ],
        env={"NEON_API_KEY": secret},
    )
    assert result.exit_code == 3
    assert "rejected (invalid or revoked)" in result.output
    assert secret not in result.output


def test_missing_key_is_exit_3_and_creates_nothing(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(data_dir), "--base-url", "http://127.0.0.1:9/api/v2"],
    )  # NEON_API_KEY unset (tests/conftest.py); set but empty: ops/test_empty_environment.py
    assert result.exit_code == 3
    assert result.stderr == (
        "Error: no API key: set NEON_API_KEY or pass --api-key-file (create one in the console "
        "under account or organization settings)\n"
    )
    assert not data_dir.exists()  # no state, lock or staging folder for a run that cannot run


def test_project_scoped_key_with_project_flag(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=24, projects=3, days=1)
    pid = sim.project_ids()[1]
    summary = run_sync(sim, tmp_path, key=sim.project_key(pid), project_ids=[pid])
    assert summary.outcome == "ok" and summary.projects_total == 1
    assert_matches_truth(sim, tmp_path, [pid])
    assert {r["project_id"] for r in read_versions(tmp_path)} == {pid}


def test_projects_named_beside_an_organization_are_synced_with_its_projects(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--project X --org-id B` (PRODUCT.md: both filters) took the ids alone: organization B
    was never listed, and the run said `sync ok: 1/1 projects`, exit 0."""
    sim = make_sim(seed=34, projects=4, shared_projects=0, orgs=2, days=1)
    org_a, org_b = sim.org_ids
    named = sim.project_ids(org_a)[0]
    summary = run_sync(sim, tmp_path, project_ids=[named], org_ids=[org_b])
    assert (summary.outcome, summary.projects_total) == ("ok", 1 + len(sim.project_ids(org_b)))
    synced = {r["project_id"] for r in read_versions(tmp_path)}
    assert synced == {named, *sim.project_ids(org_b)}
    assert_matches_truth(sim, tmp_path, sorted(synced))
    # An organization mistyped beside them: the projects named are synced, the run partial (it
    # was discovery failing, exit 5, nothing synced).
    other = sim.project_ids(org_a)[1]
    summary = run_sync(sim, tmp_path / "typo", project_ids=[other], org_ids=["org-typo"])
    assert (summary.outcome, summary.exit_code) == ("partial", 1)
    assert summary.errors[""].startswith("listing the projects of organization org-typo failed: ")
    assert {r["project_id"] for r in read_versions(tmp_path / "typo")} == {other}


def test_project_scoped_key_listing_sees_its_project(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=25, projects=3, days=1)
    pid = sim.project_ids()[2]
    summary = run_sync(sim, tmp_path, key=sim.project_key(pid))
    assert summary.outcome == "ok" and summary.projects_total == 1
    assert_matches_truth(sim, tmp_path, [pid])


def test_deleted_project_keeps_its_history(make_sim: Any, tmp_path: Path) -> None:
    import duckdb

    sim = make_sim(seed=26, projects=3, days=1)
    gone = sim.project_ids()[0]
    before = {k for k, v in sim.ground_truth([gone]).items()}
    run_sync(sim, tmp_path)
    sim.delete_project(gone)
    summary = run_sync(sim, tmp_path)
    assert summary.outcome == "ok"
    kept = {r["id"] for r in read_versions(tmp_path) if r["project_id"] == gone}
    assert kept == before
    [(deleted_at, last_seen)] = duckdb.sql(
        f"SELECT deleted_at, last_seen_at FROM read_parquet('{tmp_path}/projects/projects.parquet') WHERE id = '{gone}'"
    ).fetchall()
    assert deleted_at is not None and last_seen is not None and deleted_at > last_seen


def test_a_404_of_a_listed_projects_operations_is_no_deletion(
    make_sim: Any, tmp_path: Path
) -> None:
    """One 404 of the operations of a project the run's own listing shows (a proxy, a moment
    of the API) marked it deleted and dropped its open operations for good: every later run
    exited 0 while `operations` kept their old state (thirteenth review). The project fails
    (exit 1), stays tracked, and the next run reads what changed."""
    sim = make_sim(seed=27, projects=2, days=1)
    pid = sim.project_ids()[0]
    running = sim.add_operations(pid, 3, status="running")
    assert run_sync(sim, tmp_path).outcome == "ok"
    sim.fail_requests(f"/projects/{pid}/operations", 404, times=1)
    cut = run_sync(sim, tmp_path)
    assert (cut.outcome, cut.exit_code, cut.projects_failed) == ("partial", 1, 1)
    assert cut.errors == {
        pid: f"project {pid}: its operations answered 404, the project itself did not; tried "
        "again in the next run"
    }
    for op_id in running:
        sim.update_operation(op_id, status="finished")
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)
    import duckdb

    [(deleted_at,)] = duckdb.sql(
        f"SELECT deleted_at FROM read_parquet('{tmp_path}/projects/projects.parquet') "
        f"WHERE id = '{pid}'"
    ).fetchall()
    assert deleted_at is None


def test_a_404_whose_confirming_get_the_budget_left_fails_the_project(
    make_sim: Any, tmp_path: Path
) -> None:
    """Under --max-requests, a 404 of a project's operations whose own GET the budget (spent
    by the other walks) could not send was lost: the walk stopped as at a spent budget, exit 0
    `budget`, no error and no log, the project picked first and skipped again every run. The
    project fails (exit 1, `check`'s project_error) with why, as without a budget."""
    sim = make_sim(
        seed=28, projects=2, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=5
    )
    bad, _ = sim.project_ids()
    quiet = {"refresh_open_every": 86_400, "concurrency": 1}
    assert run_sync(sim, tmp_path, **quiet).outcome == "ok"
    assert run_sync(sim, tmp_path, project_ids=[bad], **quiet).outcome == "ok"  # the other: stalest
    sim.fail_requests(f"/projects/{bad}/operations", 404)
    before = sim.stats()["by_route"]
    # The listing (3), the good project's page, the bad one's: nothing left for its GET.
    cut = run_sync(sim, tmp_path, max_requests=5, **quiet)
    assert (cut.outcome, cut.exit_code, cut.projects_failed) == ("partial", 1, 1)
    assert cut.errors == {
        bad: f"project {bad}: its operations answered 404; its own GET (is it gone?) did not "
        "fit in the run's --max-requests or --time-budget: tried again in the next run (raise "
        "the budget if this repeats)"
    }
    after = sim.stats()["by_route"]
    assert after.get("GET /projects/{project_id}", 0) == before.get("GET /projects/{project_id}", 0)
    # Without a budget: the project answers, its operations do not.
    again = run_sync(sim, tmp_path, **quiet)
    assert (again.outcome, again.errors) == (
        "partial",
        {
            bad: f"project {bad}: its operations answered 404, the project itself did not; "
            "tried again in the next run"
        },
    )


def test_a_404_in_a_project_run_is_a_deletion_only_when_the_project_answers_404_too(
    make_sim: Any, tmp_path: Path
) -> None:
    """`--project ID` runs list nothing: a 404 of the operations marked the project deleted and
    dropped its open operations (the review of the fix above). The project's own GET decides:
    it answers, a failed project; it is gone too, a deleted one (its history kept)."""
    sim = make_sim(seed=32, projects=2, days=1)
    both = sim.project_ids()[:2]
    pid = both[0]
    running = sim.add_operations(pid, 2, status="running")
    assert run_sync(sim, tmp_path).outcome == "ok"
    sim.fail_requests(f"/projects/{pid}/operations", 404, times=1)
    cut = run_sync(sim, tmp_path, project_ids=both)
    assert (cut.outcome, cut.exit_code, cut.projects_deleted) == ("partial", 1, 0)
    for op_id in running:
        sim.update_operation(op_id, status="finished")
    assert run_sync(sim, tmp_path, project_ids=both).outcome == "ok"
    assert_matches_truth(sim, tmp_path)
    sim.delete_project(pid)
    gone = run_sync(sim, tmp_path, project_ids=both)
    assert (gone.outcome, gone.projects_deleted) == ("ok", 1)


def test_a_project_back_in_the_listing_has_its_open_operations_tracked_again(
    make_sim: Any, tmp_path: Path
) -> None:
    """A project one complete listing left out is marked deleted; its open operations were
    dropped from tracking then, so when a later listing showed it again they kept their old
    state for good, every run exit 0 (thirteenth review). They stay tracked, not re-read while
    it is gone, and are read again once it is back."""
    sim = make_sim(seed=31, projects=2, days=1)
    pid = sim.project_ids()[0]
    running = sim.add_operations(pid, 2, status="running")
    first = run_sync(sim, tmp_path)
    assert first.outcome == "ok"
    with sim.world.lock:
        sim.world.by_id[pid].deleted = True
        sim.world._listing.clear()
    gone = run_sync(sim, tmp_path)
    assert gone.outcome == "ok"
    # Still tracked, but not counted as open (nor planned, nor checked) while it is gone.
    con = sqlite3.connect(tmp_path / "state.sqlite")
    try:
        tracked = dict(con.execute("SELECT id, status FROM open_ops WHERE project_id = ?", (pid,)))
    finally:
        con.close()
    assert set(running) <= set(tracked)
    still_open = [i for i, status in tracked.items() if status not in TERMINAL_STATUSES]
    assert gone.open_operations == first.open_operations - len(still_open)
    with sim.world.lock:
        sim.world.by_id[pid].deleted = False
        sim.world._listing.clear()
    for op_id in running:
        sim.update_operation(op_id, status="finished")
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


def _tracked(data_dir: Path, pid: str) -> dict[str, str]:
    """The state's tracked operations of one project: id -> status."""
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return dict(con.execute("SELECT id, status FROM open_ops WHERE project_id = ?", (pid,)))
    finally:
        con.close()


def _deleted_at(data_dir: Path) -> dict[str, Any]:
    import duckdb

    path = data_dir / "projects" / "projects.parquet"
    return dict(duckdb.sql(f"SELECT id, deleted_at FROM read_parquet('{path}')").fetchall())


def test_a_404_pair_of_a_listed_project_keeps_its_open_operations_tracked(
    make_sim: Any, tmp_path: Path
) -> None:
    """A 404 of a listed project's operations and of the project itself marked it deleted and
    dropped its open operations from tracking: when it was listed again they kept their old
    state for good, every run exit 0, `check` ok, with --refresh-open-every 0 (review). The
    pair is what a project deleted since the listing answers (the mark stands), but also a
    moment of the API: they stay tracked, not read while it is gone, and are read again when a
    listing shows it again; a listing without it confirms the deletion."""
    sim = make_sim(seed=33, projects=3, days=1)
    back, gone, other = sim.project_ids()[:3]
    running = {pid: sim.add_operations(pid, 3, status="running") for pid in (back, gone)}
    first = run_sync(sim, tmp_path)
    assert first.outcome == "ok"
    before = {pid: _tracked(tmp_path, pid) for pid in (back, gone)}
    for pid in (back, gone):
        assert set(running[pid]) <= set(before[pid])
        sim.fail_requests(f"/projects/{pid}/operations", 404, times=1)
        sim.fail_requests(f"/projects/{pid}", 404, times=1)
    cut = run_sync(sim, tmp_path)
    assert (cut.outcome, cut.exit_code, cut.projects_deleted) == ("ok", 0, 2)
    for pid in (back, gone):
        assert _tracked(tmp_path, pid) == before[pid]  # kept, as they were
    still_open = sum(s not in TERMINAL_STATUSES for t in before.values() for s in t.values())
    assert cut.open_operations == first.open_operations - still_open  # not counted meanwhile
    deleted = _deleted_at(tmp_path)
    assert deleted[back] is not None and deleted[gone] is not None and deleted[other] is None
    sim.clear_failures()
    sim.delete_project(gone)  # the next listing confirms this one's deletion
    for op_id in running[back]:
        sim.update_operation(op_id, status="finished", total_duration_ms=1234)
    after = run_sync(sim, tmp_path)
    assert (after.outcome, after.exit_code, after.projects_deleted) == ("ok", 0, 0)
    assert_matches_truth(sim, tmp_path, [back, other])
    assert {i: latest_raw(tmp_path)[i]["status"] for i in running[back]} == dict.fromkeys(
        running[back], "finished"
    )
    # Re-read: finished, kept for one more look while it settles (it may change in place).
    tracked = _tracked(tmp_path, back)
    assert {i: tracked.get(i) for i in running[back]} == dict.fromkeys(running[back], "finished")
    assert _tracked(tmp_path, gone) == before[gone]  # tracked, not read while it is gone
    deleted = _deleted_at(tmp_path)
    assert deleted[back] is None and deleted[gone] is not None and deleted[other] is None


def test_key_never_lands_in_any_file(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=27, projects=2, days=1)
    sim.faults = Faults(p_5xx=0.1, seed=3)
    run_sync(sim, tmp_path)
    needle = sim.personal_key.encode()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert needle not in path.read_bytes(), path


def test_a_project_field_of_an_unexpected_type_fails_nothing(make_sim: Any, tmp_path: Path) -> None:
    """A listed project whose `name` is a list or `owner_id` an object (the API changing a
    field's type) made every run of the account exit 5, "unexpected error": SQLite cannot bind
    them. Such a value is kept as its JSON text, as the operations' typed columns keep theirs,
    and the listing's `raw` keeps it as sent."""
    import duckdb

    sim = make_sim(seed=29, projects=2, days=1)
    pid = sim.project_ids()[0]
    odd = {"name": ["a", 1], "owner_id": {"a": 1}, "provisioner": 7}
    with sim.world.lock:
        project = sim.world.by_id[pid]
        project.meta.update(odd)
        project._rendered_meta = None
    summary = run_sync(sim, tmp_path)
    assert (summary.outcome, summary.exit_code) == ("ok", 0)
    assert_matches_truth(sim, tmp_path)
    row = duckdb.sql(
        "SELECT name, provisioner FROM "
        f"read_parquet('{tmp_path}/projects/projects.parquet') WHERE id = '{pid}'"
    ).fetchall()
    assert row == [('["a",1]', "7")]


def test_unknown_actions_statuses_and_fields_are_kept(make_sim: Any, tmp_path: Path) -> None:
    import orjson

    sim = make_sim(seed=28, projects=1, days=1)
    pid = sim.project_ids()[0]
    [op_id] = sim.add_operations(pid, 1, action="quantum_rebalance", status="pondering")
    sim.update_operation(op_id, shiny_new_field={"nested": [1, 2]})
    run_sync(sim, tmp_path)
    [row] = [r for r in read_versions(tmp_path) if r["id"] == op_id]
    assert row["action"] == "quantum_rebalance" and row["status"] == "pondering"
    assert orjson.loads(row["raw"])["shiny_new_field"] == {"nested": [1, 2]}
    summary = run_sync(sim, tmp_path)
    assert summary.open_operations >= 1  # an unknown status is not terminal


def test_a_refused_first_connection_fails_in_seconds(tmp_path: Path) -> None:
    """Issue 19: connection refused on the very first request took 87 s (8 attempts on the
    organizations listing, then a fallback listing with 8 more), silent without -v. Now three
    quick attempts, a warning at once, and exit 5 naming the cause; no fallback listing."""
    import socket

    with socket.socket() as s:  # a port that was free a moment ago: nothing listens there
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/api/v2/"
    started = time.monotonic()
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(tmp_path), "--base-url", url],
        env={"NEON_API_KEY": "napi-test-key-0001"},
    )
    assert time.monotonic() - started < 10
    assert result.exit_code == 5, result.output
    assert result.stdout.startswith("sync failed: 0/0 projects, 0 new and 0 changed operations, 3 ")
    refused = "[Errno 111] Connection refused"
    lines = result.stderr.splitlines()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ .*", lines[0]), lines[0]
    assert [lines[0].split(" ", 1)[1], *lines[1:]] == [
        f"WARNING opsaudit.client: cannot connect to {url} ({refused}); retrying",
        f"Error: discovery failed: cannot connect to {url} ({refused}; 3 attempts, first request "
        "GET /users/me/organizations): check --base-url, DNS and the network (firewall, proxy)",
    ]


def test_a_failing_organizations_listing_is_no_reason_to_list_otherwise(
    make_sim: Any, tmp_path: Path
) -> None:
    """The fallback listing (no org_id) is for keys that cannot list organizations (a 4xx), not
    for a server failing that request: its error ends discovery, named."""
    sim = make_sim(seed=25, projects=2, days=1, orgs=1)
    sim.fail_requests("/users/me/organizations", 503)
    summary = run_sync(sim, tmp_path)
    sim.clear_failures()
    assert summary.outcome == "failed"
    error = summary.error or ""
    assert error.startswith(
        "discovery failed: GET /users/me/organizations kept failing after 12 attempts: HTTP 503 "
        "scripted failure 503 (request id "
    ), error
    assert sim.stats()["by_route"] == {"GET /users/me/organizations": 12}


def test_a_base_url_without_the_apis_path_is_named(make_sim: Any, tmp_path: Path) -> None:
    """The listings answer 404 at the API's root: "discovery failed: GET /projects: not found"
    said nothing of where to look."""
    sim = make_sim(seed=26, projects=1, days=1)
    root = sim.base_url.removesuffix("/api/v2")
    summary = run_sync(sim, tmp_path, base_url=root)
    assert (summary.outcome, summary.exit_code) == ("failed", 5)
    assert summary.error is not None and summary.error.startswith(
        "discovery failed: GET /projects: not found"
    )
    assert summary.error.endswith(
        f"; is --base-url ({root}) the management API's, ending in /api/v2?"
    )
