"""Names, not ids (issue 21, PRODUCT.md "Names, not ids"): branches and computes with their
history, read when the rules say so, joined into operations and operation_versions."""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import exporter
from exporter.api.client import RetryPolicy
from exporter.simulator._server import _Handler
from exporter.simulator._world import World

from .conftest import assert_matches_truth, empty_sim, run_sync, sim_clock

_BRANCHES = "GET /projects/{project_id}/branches"
_ENDPOINTS = "GET /projects/{project_id}/endpoints"
_ENDPOINT_FIELDS = (
    "name",
    "branch_id",
    "type",
    "autoscaling_limit_min_cu",
    "autoscaling_limit_max_cu",
    "suspend_timeout_seconds",
)


def _rows(data_dir: Path, sql: str) -> list[tuple[Any, ...]]:
    con = exporter.connect(data_dir)
    try:
        return con.execute(sql).fetchall()
    finally:
        con.close()


def _listing_requests(sim: Any) -> tuple[int, int]:
    by_route = sim.stats()["by_route"]
    return by_route.get(_BRANCHES, 0), by_route.get(_ENDPOINTS, 0)


def test_backfill_names_equal_the_api_and_operations_carry_them(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=41, projects=3, shared_projects=1, days=4, branches_page=2)
    summary = run_sync(sim, tmp_path)
    assert summary.outcome == "ok"
    pids = sim.project_ids()
    branch_pages = sum(-(-len(sim.branches(p)) // 2) for p in pids)
    sim.reset_stats()
    truth_b = {b["id"]: (p, b) for p in pids for b in sim.branches(p)}
    truth_e = {e["id"]: (p, e) for p in pids for e in sim.endpoints(p)}
    got_b = {
        r[0]: r[1:]
        for r in _rows(
            tmp_path,
            'SELECT id, project_id, name, parent_id, "default", protected, created_by, deleted_at '
            "FROM branches",
        )
    }
    assert got_b == {
        i: (
            p,
            b["name"],
            b.get("parent_id"),
            b["default"],
            b["protected"],
            (b.get("created_by") or {}).get("name"),
            None,
        )
        for i, (p, b) in truth_b.items()
    }
    got_e = {
        r[0]: r[1:]
        for r in _rows(
            tmp_path,
            "SELECT id, project_id, name, branch_id, type, autoscaling_limit_min_cu, "
            "autoscaling_limit_max_cu, suspend_timeout_seconds FROM endpoints",
        )
    }
    assert got_e == {i: (p, *(e.get(f) for f in _ENDPOINT_FIELDS)) for i, (p, e) in truth_e.items()}
    assert any(v[1] is None for v in got_e.values())  # unnamed computes: NULL, no error
    # Every operation carries the name of its branch / compute, NULL for ids never listed.
    ops = _rows(
        tmp_path, "SELECT branch_id, branch_name, endpoint_id, endpoint_name FROM operations"
    )
    assert ops and all(
        bn == (truth_b[b][1]["name"] if b in truth_b else None)
        and en == (truth_e[e][1].get("name") if e in truth_e else None)
        for b, bn, e, en in ops
    )
    assert any(b is not None and b not in truth_b for b, _, _, _ in ops)  # deleted before
    assert _rows(tmp_path, "SELECT count(*) FROM operation_versions WHERE branch_name IS NULL")
    # failures_by_branch: per branch id, by its name, as the API's operations count them.
    per_branch: dict[str, list[int]] = {}
    for op in sim.ground_truth(pids).values():
        if op.get("branch_id") is not None:
            counts = per_branch.setdefault(op["branch_id"], [0, 0])
            counts[0] += 1
            counts[1] += (op.get("failures_count") or 0) > 0
    got_f = _rows(
        tmp_path, "SELECT branch_id, branch_name, operations, failed FROM failures_by_branch"
    )
    assert {r[0]: r[1:] for r in got_f} == {
        b: ((truth_b[b][1]["name"] if b in truth_b else None), *c) for b, c in per_branch.items()
    }
    # Backfill cost: the two listings per project (branches paged by pagination.next).
    assert summary.names_requests == branch_pages + len(pids)


def test_no_change_sync_sends_no_listing_request(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=42, projects=2, days=2)
    run_sync(sim, tmp_path)
    sim.reset_stats()
    summary = run_sync(sim, tmp_path)
    assert summary.outcome == "ok" and summary.new_operations == 0
    assert _listing_requests(sim) == (0, 0)
    assert summary.names_requests == 0
    # --names-max-age 0: both lists of every project in every run.
    run_sync(sim, tmp_path, names_max_age=0)
    projects = len(sim.project_ids())
    assert _listing_requests(sim) == (projects, projects)


def test_new_branch_appears_in_the_same_run_and_costs_two_requests(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = empty_sim(make_sim, seed=43, projects=2)
    run_sync(sim, tmp_path)
    pid = sim.project_ids()[0]
    branch_id, endpoint_id, op_ids = sim.add_branch(pid, "preview/pr-42")
    sim.reset_stats()
    summary = run_sync(sim, tmp_path)
    assert summary.new_operations == 2
    assert _listing_requests(sim) == (1, 1)  # only the project that met the new ids
    rows = _rows(
        tmp_path,
        "SELECT id, branch_name, endpoint_name FROM operations WHERE branch_id = ? ORDER BY id".replace(
            "?", f"'{branch_id}'"
        ),
    )
    endpoint_name = {e["id"]: e.get("name") for e in sim.endpoints(pid)}[endpoint_id]
    assert sorted(r[0] for r in rows) == sorted(op_ids)
    assert {(r[1], r[2]) for r in rows} == {
        ("preview/pr-42", None),
        ("preview/pr-42", endpoint_name),
    }
    assert _rows(tmp_path, f"SELECT name FROM branches WHERE id = '{branch_id}'") == [
        ("preview/pr-42",)
    ]


def test_events_carry_the_name_in_effect_when_the_operation_was_created(
    make_sim: Any, tmp_path: Path
) -> None:
    # A renamed branch: a new state of an operation created before the rename says the old
    # name, an operation created after it the new one (the outbox's per-row path; a branch
    # with one name for all time is looked up once per commit).
    from exporter.events.outbox import EventsConfig

    sim = empty_sim(make_sim, seed=45, at_now=True)
    pid = sim.project_ids()[0]
    branch_id, _endpoint, before = sim.add_branch(pid, "preview/pr-42")
    data, events_file = tmp_path / "data", tmp_path / "events.jsonl"
    events = EventsConfig(file=events_file)
    run_sync(sim, data, events=events)
    sim.advance(60)
    sim.change_branch(branch_id, name="release/1.0")
    run_sync(sim, data, names_max_age=0, events=events)
    sim.advance(60)
    after = sim.add_operations(pid, 1, action="apply_config")
    sim.update_operation(after[0], branch_id=branch_id)
    sim.update_operation(before[0], status="failed", failures_count=3)
    run_sync(sim, data, events=events)
    import orjson

    got = {
        e["data"]["id"]: e["data"]["branch_name"]
        for e in map(orjson.loads, events_file.read_bytes().splitlines())
    }
    assert got == {before[0]: "preview/pr-42", after[0]: "release/1.0"}


def test_rename_makes_two_versions_and_older_operations_keep_the_old_name(
    make_sim: Any, tmp_path: Path
) -> None:
    # The simulated clock starts at the wall clock: names are valid from when they were read.
    sim = empty_sim(make_sim, seed=44, at_now=True)
    pid = sim.project_ids()[0]
    branch_id, _endpoint, before = sim.add_branch(pid, "preview/pr-42")
    run_sync(sim, tmp_path)
    sim.advance(60)
    sim.change_branch(branch_id, name="release/1.0")
    # Within --names-max-age and nothing unknown: the rename is not read yet.
    run_sync(sim, tmp_path)
    assert _rows(tmp_path, f"SELECT name FROM branches WHERE id = '{branch_id}'") == [
        ("preview/pr-42",)
    ]
    run_sync(sim, tmp_path, names_max_age=0)
    sim.advance(60)
    after = sim.add_operations(pid, 1, action="apply_config")
    sim.update_operation(after[0], branch_id=branch_id)
    run_sync(sim, tmp_path)
    versions = _rows(
        tmp_path,
        f"SELECT version, name, valid_to IS NULL FROM branch_versions WHERE id = '{branch_id}' "
        "ORDER BY version",
    )
    assert versions == [(1, "preview/pr-42", False), (2, "release/1.0", True)]
    names = dict(
        _rows(tmp_path, f"SELECT id, branch_name FROM operations WHERE branch_id = '{branch_id}'")
    )
    assert names == {**dict.fromkeys(before, "preview/pr-42"), after[0]: "release/1.0"}
    history = _rows(tmp_path, "SELECT DISTINCT id, branch_name FROM operation_versions")
    assert dict(history)[before[0]] == "preview/pr-42"
    assert _rows(tmp_path, f"SELECT name FROM branches WHERE id = '{branch_id}'") == [
        ("release/1.0",)
    ]
    # The state answers the same names (what events carry when they are committed).
    from exporter.store.state import StateDB

    ops = _rows(tmp_path, "SELECT branch_id, epoch_us(created_at), branch_name FROM operations")
    state = StateDB(tmp_path / "state.sqlite", read_only=True)
    try:
        with state._lock:
            got = state.names_in_effect(state._con, "branch", [(b, c) for b, c, _ in ops])
    finally:
        state.close()
    assert got == [n for _, _, n in ops]


def test_deleted_branch_keeps_its_name_and_gets_deleted_at(make_sim: Any, tmp_path: Path) -> None:
    sim = empty_sim(make_sim, seed=45)
    pid = sim.project_ids()[0]
    branch_id, endpoint_id, ops = sim.add_branch(pid, "dev/alice")
    run_sync(sim, tmp_path)
    sim.delete_branch(branch_id)
    run_sync(sim, tmp_path, names_max_age=0)
    rows = _rows(
        tmp_path, f"SELECT name, deleted_at IS NOT NULL FROM branches WHERE id = '{branch_id}'"
    )
    assert rows == [("dev/alice", True)]
    assert _rows(
        tmp_path, f"SELECT deleted_at IS NOT NULL FROM endpoints WHERE id = '{endpoint_id}'"
    ) == [(True,)]
    names = _rows(tmp_path, f"SELECT DISTINCT branch_name FROM operations WHERE id = '{ops[0]}'")
    assert names == [("dev/alice",)]


def test_every_named_id_is_known_after_the_first_walk(make_sim: Any, tmp_path: Path) -> None:
    # The first walk reads the listings after its first page; an id that only older pages
    # name and that the listings lack (a branch deleted since) is known unlisted, so it never
    # makes the names due again.
    from exporter.store.state import StateDB

    sim = empty_sim(make_sim, seed=48)
    pid = sim.project_ids()[0]
    gone, gone_endpoint, _ops = sim.add_branch(pid, "dev/gone")
    sim.delete_branch(gone)
    sim.advance(60)
    sim.add_operations(pid, 1500, same_second=False)  # the first page does not reach them
    assert run_sync(sim, tmp_path).outcome == "ok"
    named = _rows(
        tmp_path,
        "SELECT branch_id FROM operations WHERE branch_id IS NOT NULL UNION "
        "SELECT endpoint_id FROM operations WHERE endpoint_id IS NOT NULL",
    )
    listed = _rows(tmp_path, "SELECT id FROM branches UNION SELECT id FROM endpoints")
    assert {i for (i,) in named} - {i for (i,) in listed} == {gone, gone_endpoint}
    state = StateDB(tmp_path / "state.sqlite", read_only=True)
    try:
        cp = state.checkpoints()(pid)
    finally:
        state.close()
    assert not cp.names_due and cp.names_read_us is not None
    assert {i for (i,) in named} - cp.known_ids == set()


def test_moving_counters_add_no_version_and_unnamed_computes_stay_null(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=46, projects=2, days=2)
    for _ in range(3):
        assert run_sync(sim, tmp_path, names_max_age=0).outcome == "ok"
    counts = _rows(
        tmp_path,
        "SELECT (SELECT count(*) FROM branch_versions), (SELECT count(*) FROM branches), "
        "(SELECT count(*) FROM endpoint_versions), (SELECT count(*) FROM endpoints), "
        "(SELECT count(*) FROM project_versions), (SELECT count(*) FROM projects)",
    )[0]
    assert counts[0] == counts[1] > 0 and counts[2] == counts[3] > 0 and counts[4] == counts[5]
    pid = sim.project_ids()[0]
    endpoint = next(e for e in sim.endpoints(pid) if "name" in e)
    sim.change_endpoint(endpoint["id"], name=None)
    run_sync(sim, tmp_path, names_max_age=0)
    assert _rows(
        tmp_path,
        f"SELECT version, name FROM endpoint_versions WHERE id = '{endpoint['id']}' ORDER BY 1",
    ) == [(1, endpoint["name"]), (2, None)]


def test_kill_between_the_operations_and_the_names_leaves_nothing_half_written(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=47, projects=1, shared_projects=0, days=2)
    # The endpoints listing keeps failing: the sync retries it, holding the rows read before
    # it (they are committed with the listings: their events carry the names).
    sim.fail_requests("/endpoints", 503)
    env = {
        **os.environ,
        "NEON_API_KEY": sim.personal_key,
        "OPSAUDIT_BASE_URL": sim.base_url,
        "OPSAUDIT_DATA_DIR": str(tmp_path),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "exporter", "sync", "--max-rps", "0"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if _listing_requests(sim)[1]:
                break
            time.sleep(0.05)
        time.sleep(2)  # retrying the endpoints listing
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait()
    # No names half-written; the views answer.
    assert _rows(tmp_path, "SELECT count(*), count(branch_name) FROM operations")[0][1] == 0
    assert _rows(tmp_path, "SELECT count(*) FROM branches") == [(0,)]
    sim.clear_failures()
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert _listing_requests(sim) == (1, 1)  # the names were still due
    assert_matches_truth(sim, tmp_path)
    pid = sim.project_ids()[0]
    assert _rows(tmp_path, "SELECT count(*) FROM branches") == [(len(sim.branches(pid)),)]
    assert (
        _rows(tmp_path, "SELECT count(*) FROM operations WHERE branch_name IS NULL")[0][0]
        < (_rows(tmp_path, "SELECT count(*) FROM operations")[0][0])
    )


def test_a_single_projects_listing_failing_after_its_operations_is_partial(
    make_sim: Any, tmp_path: Path
) -> None:
    """Its operations are committed: the run synced something (exit 1, as with two projects),
    not "nothing could be synced" (exit 5, check the network)."""
    sim = make_sim(seed=48, projects=1, shared_projects=0, days=1)
    (pid,) = sim.project_ids()
    sim.fail_requests(f"/projects/{pid}/endpoints", 500)
    failed = run_sync(sim, tmp_path, retry=RetryPolicy(max_attempts=2, backoff_initial=0.01))
    assert (failed.outcome, failed.exit_code, failed.projects_failed) == ("partial", 1, 1)
    assert failed.new_operations == len(sim.ground_truth()) > 0
    assert_matches_truth(sim, tmp_path)


def test_a_404_on_a_listing_is_no_deletion_and_leaves_the_names_due(
    make_sim: Any, tmp_path: Path
) -> None:
    """A 404 of a listing while the operations answer: no deletion, and no success either (it
    said ok run after run, the operations unnamed, `check` silent): the project fails, its
    operations committed, the names due for the next run."""
    sim = make_sim(seed=48, projects=2, shared_projects=0, days=1)
    pid, other = sim.project_ids()
    sim.fail_requests(f"/projects/{pid}/branches", 404)
    failed = run_sync(sim, tmp_path)
    assert (failed.outcome, failed.exit_code, failed.projects_ok) == ("partial", 1, 1)
    assert failed.errors == {
        pid: f"project {pid}: the branches or endpoints listing answered 404 while its "
        "operations answered; its names are read again in the next run"
    }
    assert_matches_truth(sim, tmp_path)
    assert _rows(tmp_path, "SELECT count(*) FROM projects WHERE deleted_at IS NULL") == [(2,)]
    assert _rows(tmp_path, f"SELECT last_error IS NOT NULL FROM projects WHERE id = '{pid}'") == [
        (True,)
    ]
    assert _rows(tmp_path, f"SELECT count(*) FROM branches WHERE project_id = '{pid}'") == [(0,)]
    sim.clear_failures()
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert _listing_requests(sim) == (1, 1)
    assert _rows(tmp_path, "SELECT count(*) FROM branches") == [
        (len(sim.branches(pid)) + len(sim.branches(other)),)
    ]


def test_check_names_the_branch_a_failure_rate_comes_from(make_sim: Any, tmp_path: Path) -> None:
    import datetime as dt

    from exporter.ops.check import parse_threshold, run_check

    sim = empty_sim(make_sim, seed=49, at_now=True)
    pid = sim.project_ids()[0]
    branch_id, endpoint_id, _ops = sim.add_branch(pid, "preview/pr-42")
    failed = sim.add_operations(pid, 4, action="start_compute", same_second=False)
    for op_id in failed:
        sim.update_operation(op_id, branch_id=branch_id, endpoint_id=endpoint_id, failures_count=1)
    run_sync(sim, tmp_path)
    sim.delete_branch(branch_id)
    run_sync(sim, tmp_path, names_max_age=0)
    report = run_check(
        tmp_path,
        thresholds=[parse_threshold("failure_rate(start_compute) > 10% over 1d")],
        as_of=dt.datetime.now(dt.timezone.utc) + dt.timedelta(minutes=5),
    )
    [finding] = [f for f in report.findings if f.check == "threshold"]
    assert finding.message.endswith(
        f"; most: start_compute failed 4 times on `preview/pr-42` ({branch_id}, deleted)"
    )


def test_a_state_from_before_names_is_migrated_and_its_names_read(
    make_sim: Any, tmp_path: Path
) -> None:
    import sqlite3

    from exporter.store.state import FORMAT_VERSION

    sim = make_sim(seed=50, projects=1, shared_projects=0, days=1)
    run_sync(sim, tmp_path)
    con = sqlite3.connect(tmp_path / "state.sqlite")
    for table in ("named", "name_versions", "unlisted"):
        con.execute(f"DROP TABLE {table}")
    for column in ("names_read_us", "names_due"):  # as if absent (SQLite's DROP COLUMN refuses
        con.execute(f"ALTER TABLE projects RENAME COLUMN {column} TO old_{column}")  # this DDL)
    before = "7"  # the format before names (8)
    con.execute("UPDATE meta SET value = ? WHERE key = 'format_version'", (before,))
    con.commit()
    con.close()
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert _listing_requests(sim) == (1, 1)  # never listed in this state: read once
    pid = sim.project_ids()[0]
    assert _rows(tmp_path, "SELECT count(*) FROM branches") == [(len(sim.branches(pid)),)]
    con = sqlite3.connect(tmp_path / "state.sqlite")
    assert con.execute("SELECT value FROM meta WHERE key = 'format_version'").fetchone() == (
        str(FORMAT_VERSION),
    )
    con.close()


def test_a_run_cut_short_before_the_listings_leaves_them_due(make_sim: Any, tmp_path: Path) -> None:
    sim = empty_sim(make_sim, seed=52)
    run_sync(sim, tmp_path)
    pid = sim.project_ids()[0]
    branch_id, _endpoint, _ops = sim.add_branch(pid, "hotfix/login-3")
    sim.reset_stats()
    listing = 3  # organizations, the org's projects, shared projects
    # The operations page, then one request: the listings take two at once, or none.
    cut = run_sync(sim, tmp_path, max_requests=listing + 2)
    # The operations are in; the names, which the budget could not cover, stay due, and the
    # run says it left work undone: the project is left, the outcome `budget` (exit 0).
    assert (cut.outcome, cut.exit_code, cut.new_operations) == ("budget", 0, 2)
    assert (cut.projects_ok, cut.projects_left) == (0, 1)
    assert _listing_requests(sim) == (0, 0)
    done = run_sync(sim, tmp_path)  # nothing new to walk: the names were due
    assert (done.outcome, done.projects_ok, done.projects_left) == ("ok", 1, 0)
    assert _listing_requests(sim) == (1, 1)
    assert _rows(tmp_path, f"SELECT name FROM branches WHERE id = '{branch_id}'") == [
        ("hotfix/login-3",)
    ]


# A sync killed (SIGKILL) at the start of the names export: every operation is committed, the
# names tables are not rewritten yet.
_KILLED_BEFORE_THE_NAMES = """
import os, signal, sys
import exporter.store.local.exports as exports
exports.export_names = lambda store: os.kill(os.getpid(), signal.SIGKILL)
from exporter.engine.sync import SyncConfig, sync
sync(SyncConfig(data_dir=sys.argv[1], api_key=sys.argv[2], base_url=sys.argv[3], max_rps=None))
"""


def _names_as_read(data_dir: Path) -> tuple[list[Any], list[Any], list[Any]]:
    return (
        _rows(data_dir, "SELECT id, name FROM branches ORDER BY id"),
        _rows(data_dir, "SELECT id, version, name FROM branch_versions ORDER BY id, version"),
        _rows(
            data_dir,
            "SELECT o.id FROM operations o JOIN branches b ON b.id = o.branch_id "
            "WHERE o.branch_name IS NULL",
        ),
    )


def test_a_kill_before_the_names_export_leaves_the_views_with_the_committed_names(
    make_sim: Any, tmp_path: Path
) -> None:
    """Locally the names Parquet files are rewritten at the end of a run: killed after the
    operations' commits and before that, readers still show the names the state committed with
    those operations (not the stale files), and the next run writes the files."""
    from exporter.core.names import TABLES
    from exporter.store.state import StateDB

    sim = make_sim(seed=55, projects=2, shared_projects=0, days=1, ops_per_project_per_day=30)
    data = tmp_path / "d"
    env = {**os.environ, "PYTHONPATH": str(Path(exporter.__file__).resolve().parents[1])}
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_BEFORE_THE_NAMES, str(data), sim.personal_key, sim.base_url],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr[-2000:]
    state = StateDB(data / "state.sqlite", read_only=True)
    try:
        branches, versions = (state.names_rows(t) for t in TABLES[0:3:2])
    finally:
        state.close()
    committed = (
        sorted((r["id"], r["name"]) for r in branches),
        sorted((r["id"], r["version"], r["name"]) for r in versions),
        [],
    )
    assert len(committed[0]) >= 2 and not (data / TABLES[0].file).exists()
    assert _names_as_read(data) == committed
    assert run_sync(sim, data).outcome == "ok"
    assert (data / TABLES[0].file).is_file()
    assert _names_as_read(data) == committed


def test_a_listed_object_without_a_usable_id_fails_nothing(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A branch without `id` (or a compute whose `id` is a list) in one project's listing made
    every run of the account exit 5, "unexpected error" (KeyError), and that project's
    operations were never exported. Such an object names nothing: it is skipped, as the
    state's record of the listings skips it."""
    sim = make_sim(seed=29, projects=3, shared_projects=0, days=1)
    bad = sim.project_ids()[0]
    branches, endpoints = World.branches, World.endpoints

    def branches_without_id(world: World, p: Any) -> list[dict[str, Any]]:
        out = branches(world, p)
        if p.id == bad:
            out[0] = {k: v for k, v in out[0].items() if k != "id"}
        return out

    def endpoints_with_a_list_id(world: World, p: Any) -> list[dict[str, Any]]:
        out = endpoints(world, p)
        if p.id == bad:
            out[0] = {**out[0], "id": [out[0]["id"]]}
        return out

    monkeypatch.setattr(World, "branches", branches_without_id)
    monkeypatch.setattr(World, "endpoints", endpoints_with_a_list_id)
    summary = run_sync(sim, tmp_path)
    assert (summary.outcome, summary.exit_code, summary.errors) == ("ok", 0, {})
    assert_matches_truth(sim, tmp_path)
    listed = {b["id"] for p in sim.project_ids() for b in sim.branches(p) if "id" in b}
    assert {r[0] for r in _rows(tmp_path, "SELECT id FROM branches")} == listed
    sim.reset_stats()
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert _listing_requests(sim) == (0, 0)  # the id-less objects make nothing due


def test_a_branch_newer_than_listings_read_before_the_walk_is_listed_next_run(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Listings read before the walk (an earlier run left them due), then a branch created
    before the walk's first page: its id was filed "known unlisted" for good, and its
    operations never got a name while the listings were younger than --names-max-age.
    An operation created about when the listings were read, or since, makes them due again."""
    sim = make_sim(seed=31, projects=1, shared_projects=0, days=1)
    pid = sim.project_ids()[0]
    clock = sim_clock(sim)
    sim.fail_requests(f"/projects/{pid}/branches", 500)
    assert run_sync(sim, tmp_path, clock=clock).projects_failed == 1  # names left due
    sim.clear_failures()
    endpoints, made = World.endpoints, []

    def endpoints_then_a_branch(world: World, p: Any) -> list[dict[str, Any]]:
        out = endpoints(world, p)
        if not made:  # right after this run's listings, before its walk
            made.append(world.add_branch(p.id, "created-during-sync"))
        return out

    monkeypatch.setattr(World, "endpoints", endpoints_then_a_branch)
    assert run_sync(sim, tmp_path, clock=clock).outcome == "ok"
    [(branch_id, _, op_ids)] = made
    sim.reset_stats()
    assert run_sync(sim, tmp_path, clock=clock).outcome == "ok"
    assert _listing_requests(sim) == (1, 1)
    assert _rows(
        tmp_path,
        f"SELECT count(*), count(branch_name) FROM operations WHERE branch_id = '{branch_id}'",
    ) == [(len(op_ids), len(op_ids))]
    assert_matches_truth(sim, tmp_path)


def test_a_clock_stepped_back_keeps_name_versions_in_order(make_sim: Any, tmp_path: Path) -> None:
    """A host clock stepped back (NTP, a data directory moved to a host behind) between two
    reads of the listings: the version read later started before the one it replaced (spans
    overlapped: `operations` showed an operation twice), and `--names-max-age 0` read nothing
    until the clock caught up (a negative age is not past 0)."""
    sim = make_sim(seed=59, projects=1, shared_projects=0, days=1)
    [pid] = sim.project_ids()
    step = {"us": 0}

    def clock() -> int:
        return int(sim.world.clock_us) + step["us"]

    assert run_sync(sim, tmp_path, clock=clock).outcome == "ok"
    branch = sorted((b for b in sim.branches(pid) if not b["default"]), key=lambda b: b["id"])[0]
    step["us"] = 3600 * 1_000_000  # this run's clock an hour ahead
    sim.change_branch(branch["id"], name="second")
    assert run_sync(sim, tmp_path, clock=clock, names_max_age=0).outcome == "ok"
    step["us"] = 0  # and the next one's right again
    sim.advance(60)
    sim.change_branch(branch["id"], name="third")
    sim.reset_stats()
    assert run_sync(sim, tmp_path, clock=clock, names_max_age=0).outcome == "ok"
    assert _listing_requests(sim) == (1, 1)
    rows = _rows(
        tmp_path,
        "SELECT version, name, valid_from, valid_to FROM branch_versions "
        f"WHERE id = '{branch['id']}' ORDER BY version",
    )
    assert [r[:2] for r in rows] == [(1, branch["name"]), (2, "second"), (3, "third")]
    for (_, _, start, end), (_, _, following, _) in itertools.pairwise(rows):
        assert start < end == following  # each span ends where the next begins, after it starts
    assert rows[-1][3] is None
    assert _rows(tmp_path, "SELECT count(*) - count(DISTINCT id) FROM operations") == [(0,)]


def test_a_deleted_projects_branches_and_computes_show_its_deletion(
    make_sim: Any, tmp_path: Path
) -> None:
    """A deleted project's branches and computes kept `deleted_at` NULL for good (no listing
    of the project can leave them out any more): the report showed them live. They take the
    project's `deleted_at`; a branch deleted before keeps its own."""
    sim = make_sim(seed=60, projects=2, shared_projects=0, days=1)
    gone, kept = sim.project_ids()
    assert run_sync(sim, tmp_path).outcome == "ok"
    sim.delete_project(gone)
    sim.advance(60)
    assert run_sync(sim, tmp_path).outcome == "ok"
    [(deleted_at,)] = _rows(tmp_path, f"SELECT deleted_at FROM projects WHERE id = '{gone}'")
    assert deleted_at is not None
    for view in ("branches", "endpoints"):
        by_project = _rows(
            tmp_path,
            f"SELECT project_id, count(*), count(DISTINCT deleted_at), max(deleted_at), "
            f"count(deleted_at) FROM {view} GROUP BY 1 ORDER BY 1",
        )
        totals = {p: n for p, n, *_ in by_project}
        assert totals[gone] > 0 and totals[kept] > 0
        assert {p: rest for p, _, *rest in by_project} == {
            gone: [1, deleted_at, totals[gone]],
            kept: [0, None, 0],
        }


def test_a_listing_that_lost_when_and_by_whom_keeps_what_was_known(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """A later listing whose `created_at` is not a time or whose `created_by` is gone wiped
    both to NULL: they do not change, so what an earlier listing said is kept."""
    sim = make_sim(seed=61, projects=1, shared_projects=0, days=1)
    assert run_sync(sim, tmp_path).outcome == "ok"
    before = _rows(tmp_path, "SELECT id, created_at, created_by FROM branches ORDER BY id")
    assert all(created is not None for _, created, _ in before)
    branches = World.branches

    def odd(world: World, p: Any) -> list[dict[str, Any]]:
        return [
            {**{k: v for k, v in b.items() if k != "created_by"}, "created_at": "yesterday"}
            for b in branches(world, p)
        ]

    monkeypatch.setattr(World, "branches", odd)
    assert run_sync(sim, tmp_path, names_max_age=0).outcome == "ok"
    assert _rows(tmp_path, "SELECT id, created_at, created_by FROM branches ORDER BY id") == before


def test_an_odd_id_on_an_operation_newer_than_the_listings_fails_nothing(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """Listings read before the walk, then an operation created since whose branch_id is a JSON
    object: "unhashable type" made the run exit 5. An odd id names nothing (kept in `raw`)."""
    sim = make_sim(seed=62, projects=1, shared_projects=0, days=1)
    [pid] = sim.project_ids()
    clock = sim_clock(sim)
    sim.fail_requests(f"/projects/{pid}/branches", 500)
    assert run_sync(sim, tmp_path, clock=clock).projects_failed == 1  # names left due
    sim.clear_failures()
    odd, new = sim.add_operations(pid, 2)
    sim.update_operation(odd, branch_id="br-odd-marker")
    sim.update_operation(new, branch_id="br-not-listed-yet")
    send = _Handler._send

    def odd_on_the_wire(self: Any, status: int, body: bytes, *args: Any, **kw: Any) -> None:
        send(self, status, body.replace(b'"br-odd-marker"', b'{"odd":"value"}'), *args, **kw)

    monkeypatch.setattr(_Handler, "_send", odd_on_the_wire)
    summary = run_sync(sim, tmp_path, clock=clock)
    assert (summary.outcome, summary.exit_code, summary.errors) == ("ok", 0, {})
    assert _rows(tmp_path, f"SELECT branch_id FROM operations WHERE id = '{odd}'") == [
        ('{"odd":"value"}',)
    ]


def test_the_same_values_spelled_differently_are_not_a_new_version(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """`1` and `1.0`, `...Z` and `...+00:00` (or with `.000`) say the same: a listing that
    spells them otherwise made a new version of every branch and compute it listed."""
    sim = empty_sim(make_sim, seed=47, at_now=True)
    pid = sim.project_ids()[0]
    branch_id, endpoint_id, _ops = sim.add_branch(pid, "preview/pr-7")
    sim.change_branch(branch_id, expires_at="2030-01-02T03:04:05Z")
    sim.change_endpoint(endpoint_id, autoscaling_limit_max_cu=2)
    assert run_sync(sim, tmp_path).outcome == "ok"

    def versions() -> list[int]:
        return [
            _rows(tmp_path, f"SELECT count(*) FROM {table} WHERE id = '{i}'")[0][0]
            for table, i in (("branch_versions", branch_id), ("endpoint_versions", endpoint_id))
        ]

    assert versions() == [1, 1]
    branches, endpoints = World.branches, World.endpoints

    def respelled_branches(world: World, p: Any) -> list[dict[str, Any]]:
        return [
            {**b, "expires_at": "2030-01-02T03:04:05.000+00:00"} if b["id"] == branch_id else b
            for b in branches(world, p)
        ]

    def respelled_endpoints(world: World, p: Any) -> list[dict[str, Any]]:
        return [
            {**e, "autoscaling_limit_max_cu": 2.0, "autoscaling_limit_min_cu": 0.25}
            if e["id"] == endpoint_id
            else e
            for e in endpoints(world, p)
        ]

    monkeypatch.setattr(World, "branches", respelled_branches)
    monkeypatch.setattr(World, "endpoints", respelled_endpoints)
    sim.advance(60)
    assert run_sync(sim, tmp_path, names_max_age=0).outcome == "ok"
    assert versions() == [1, 1]
    # A value that differs is still a new version.
    sim.change_branch(branch_id, expires_at="2030-01-02T03:04:06Z")
    sim.change_endpoint(endpoint_id, autoscaling_limit_max_cu=4)
    monkeypatch.undo()
    sim.advance(60)
    assert run_sync(sim, tmp_path, names_max_age=0).outcome == "ok"
    assert versions() == [2, 2]


@pytest.mark.parametrize(
    ("before", "now", "same"),
    [
        ({"default": True}, {"default": 1}, False),  # Python's True == 1 is not the API's
        ({"expires_at": "2030-01-02T03:04:05Z"}, {"expires_at": "2030-01-02T04:04:05+01:00"}, True),
        ({"expires_at": "soon"}, {"expires_at": "soon"}, True),  # not a time: as text
        ({"name": "a"}, {"name": "a", "created_at": "2030-01-01T00:00:00Z"}, True),  # untracked
        ({"parent_id": None}, {}, True),  # absent and null: both NULL in the tables
    ],
)
def test_a_branch_state_is_compared_by_meaning(
    before: dict[str, Any], now: dict[str, Any], same: bool
) -> None:
    from exporter.core.names import BRANCH

    assert BRANCH.same_state(BRANCH.tracked_json(before), now) is same
