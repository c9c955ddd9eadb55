"""Issue 9 findings 2, 7, 9, 10, 11, 15, 16: cost, disk full, secrets, read-only, workers, API down.

Each test states what a user is promised on a path the review found broken, against the real
simulator over HTTP and real files; each fails when its mechanism is removed.
"""

from __future__ import annotations

import codecs
import dataclasses
import json
import math
import os
import resource
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from exporter.api.client import RetryPolicy
from exporter.cli import cli
from exporter.engine.sync import SyncConfig
from exporter.engine.walk import WalkLimits

from .conftest import (
    LoopbackApi,
    assert_matches_truth,
    empty_sim,
    latest_raw,
    loopback_operation,
    read_versions,
    run_sync,
    serving,
    sim_clock,
)

FAST = RetryPolicy(max_attempts=3, backoff_initial=0.01, backoff_max=0.02)
LOOPBACK_KEY = "loopback-test-key-0123456789"


def _one_project(make_sim: Any, seed: int) -> tuple[Any, str]:
    sim = empty_sim(make_sim, seed)
    return sim, sim.project_ids()[0]


def _operation_requests(sim: Any) -> int:
    return sum(n for route, n in sim.stats()["by_route"].items() if "operations" in route)


# -- finding 2: the refresh of open operations costs close to the minimum ----------------------------


@pytest.mark.parametrize("open_every", [7, 33])
def test_2_no_change_refresh_costs_the_minimum(
    make_sim: Any, tmp_path: Path, open_every: int
) -> None:
    """Open operations spread through 30 pages: a no-change sync costs
    `1 + min over k of (k - 1) + (open operations below page k)` requests (PRODUCT.md)."""
    sim, pid = _one_project(make_sim, seed=120 + open_every)
    page, total = 10, 300
    statuses = ["failed" if i % open_every == 3 else "finished" for i in range(total)]
    for status in statuses:  # oldest first, one per second
        sim.add_operations(pid, 1, status=status, same_second=False)
        sim.advance(1)
    limits = WalkLimits(page_size=page, flush_rows=50, max_extend_pages=100, max_gets=500)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    # Newest first: operation i (oldest = 0) is on page (total - 1 - i) // page + 1.
    open_pages = [(total - 1 - i) // page + 1 for i, s in enumerate(statuses) if s == "failed"]
    minimum = min(k + sum(1 for p in open_pages if p > k) for k in range(1, total // page + 2))
    sim.reset_stats()
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    assert _operation_requests(sim) == minimum
    assert_matches_truth(sim, tmp_path)


# -- finding 7: disk full ---------------------------------------------------------------------------


def _cli_env(sim: Any) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPSAUDIT_", "NEON_"))}
    env["NEON_API_KEY"] = sim.personal_key
    return env


def _limit_file_size(limit: int) -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))


@pytest.mark.parametrize("room", [48_000, 150_000])  # full at the state file / at the Parquet
def test_7_disk_full_is_exit_6_with_a_clear_message_and_loses_nothing(
    make_sim: Any, tmp_path: Path, room: int
) -> None:
    """A write that fails for lack of space (here: a file-size limit, EFBIG, the same path as
    ENOSPC) ends the run with exit 6 and one clear line, never a traceback; the next run with
    room finishes the job exactly."""
    sim = make_sim(seed=71, projects=3, shared_projects=0, days=2, ops_per_project_per_day=400)
    data_dir = tmp_path / "data"
    args = [sys.executable, "-m", "exporter", "sync", "--data-dir", str(data_dir)]
    args += ["--base-url", sim.base_url, "--max-rps", "0"]
    proc = subprocess.run(
        args,
        env=_cli_env(sim),
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=lambda: _limit_file_size(room),
    )
    assert proc.returncode == 6, proc.stderr
    assert "Traceback" not in proc.stderr
    [line] = proc.stderr.splitlines()  # one clear line
    assert line.startswith("Error: ") and "free some space" in line
    done = subprocess.run(args, env=_cli_env(sim), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert_matches_truth(sim, data_dir)


# -- finding 9: secrets -------------------------------------------------------------------------------


def test_9_a_server_echoing_the_key_never_gets_it_printed_or_stored(
    make_sim: Any, tmp_path: Path
) -> None:
    sim = make_sim(seed=72, projects=2, shared_projects=0, days=1, ops_per_project_per_day=50)
    victim = sim.project_ids()[0]
    sim.echo_auth_in_errors()
    sim.fail_requests(f"/projects/{victim}/operations", 400)
    data_dir = tmp_path / "data"
    result = CliRunner().invoke(
        cli,
        [
            "sync",
            "--data-dir",
            str(data_dir),
            "--base-url",
            sim.base_url,
            "--max-rps",
            "0",
            "-vv",
            "--log-format",
            "json",
        ],
        env={"NEON_API_KEY": sim.personal_key},
    )
    assert result.exit_code == 1, result.output
    assert "request had Authorization: Bearer [REDACTED]" in result.output
    key = sim.personal_key
    assert key not in result.output
    for path in data_dir.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    from exporter.analytics.views import connect

    con = connect(data_dir)
    [(stored,)] = con.execute("SELECT last_error FROM projects WHERE id = ?", [victim]).fetchall()
    assert "Bearer [REDACTED]" in stored and key not in stored


class _KeyInStatusLine(BaseHTTPRequestHandler):
    """A gateway answering every request `403 Forbidden for key <the key it was sent>`."""

    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        key = self.headers["Authorization"].split(" ", 1)[1]
        self.send_response(403, f"Forbidden for key {key}")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_9_a_status_line_naming_the_key_is_redacted_in_every_report(tmp_path: Path) -> None:
    """The reason phrase was the error's text as sent: `Error: discovery failed: GET /projects:
    HTTP 403: Forbidden for key napi...` (the whole key), in the JSON summary's error too."""
    key = "napi0a1b2c3d4e5f6g7h8i9j0k1l2m3n4o5p6q7r8s9t0u1v2w3x4y5z6a7b8c9"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KeyInStatusLine)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/api/v2"
    try:
        result = CliRunner().invoke(
            cli,
            [
                "sync",
                "--data-dir",
                str(tmp_path / "data"),
                "--base-url",
                url,
                "--log-format",
                "json",
            ],
            env={"NEON_API_KEY": key},
        )
    finally:
        server.shutdown()
        server.server_close()
    said = "discovery failed: GET /projects: HTTP 403: Forbidden for key [REDACTED]"
    assert result.exit_code == 5
    assert json.loads(result.stderr.splitlines()[-1])["message"] == said
    assert json.loads(result.stdout.splitlines()[-1])["error"] == said
    assert key not in result.stderr + result.stdout


def test_9_sync_config_repr_hides_the_key(tmp_path: Path) -> None:
    config = SyncConfig(data_dir=tmp_path, api_key="napi_supersecret_value")
    assert "napi_supersecret_value" not in repr(config)


@pytest.mark.parametrize(
    "key_text", ["napi_abc\ndef", "napi_abc\x00def", "napi_abcdéf", "napi abc"]
)
def test_9_a_malformed_key_is_a_key_error_at_once(
    make_sim: Any, tmp_path: Path, key_text: str
) -> None:
    sim = make_sim(seed=73, projects=1, shared_projects=0, days=0)
    key_file = tmp_path / "key"
    key_file.write_bytes(key_text.encode() + b"\n")
    started = time.monotonic()
    result = CliRunner().invoke(
        cli,
        [
            "sync",
            "--data-dir",
            str(tmp_path / "data"),
            "--base-url",
            sim.base_url,
            "--api-key-file",
            str(key_file),
        ],
        env={"NEON_API_KEY": ""},
    )
    assert time.monotonic() - started < 5
    assert result.exit_code == 3, result.output
    assert "the API key is malformed" in result.output
    assert "Traceback" not in result.output
    assert key_text.split()[0].split("\x00")[0] not in result.output
    assert sim.stats()["requests"] == 0


# -- finding 10: a read-only data directory -----------------------------------------------------------


@pytest.fixture
def read_only_copy(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A directory and a read-only bind mount of it (as root, chmod would not stop writes)."""
    source, view = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    view.mkdir()
    mounted = subprocess.run(
        ["mount", "--bind", "-o", "ro", str(source), str(view)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot make a read-only mount here: {mounted.stderr.decode().strip()}")
    try:
        yield source, view
    finally:
        # Lazy: a file a reader still holds open would make a plain umount fail ("busy") and
        # leave the mount behind, which then breaks pytest's clean-up of old tmp dirs.
        subprocess.run(["umount", "--lazy", str(view)], check=False)


def test_10_read_only_data_dir_sync_is_exit_6_and_readers_still_work(
    make_sim: Any, read_only_copy: tuple[Path, Path]
) -> None:
    source, view = read_only_copy
    sim = make_sim(seed=74, projects=2, shared_projects=0, days=1, ops_per_project_per_day=60)
    assert run_sync(sim, source).outcome == "ok"
    runner = CliRunner()
    env = {"NEON_API_KEY": sim.personal_key}
    result = runner.invoke(
        cli, ["sync", "--data-dir", str(view), "--base-url", sim.base_url], env=env
    )
    assert result.exit_code == 6, result.output
    assert result.output.splitlines()[-1] == (
        f"Error: cannot write to data directory {view}: Read-only file system; sync, compact "
        "and discard-events need a writable directory (query, report, status and check only "
        "read it): mount it read-write, or choose another --data-dir"
    )
    assert "Traceback" not in result.output
    query = runner.invoke(
        cli,
        ["query", "--data-dir", str(view), "--format", "csv", "SELECT count(*) FROM operations"],
    )
    assert query.exit_code == 0, query.output
    assert query.output.splitlines()[-1] == str(len(sim.ground_truth()))


# -- finding 15: one worker's unexpected error stops the others -------------------------------------


def test_15_an_unexpected_error_in_one_worker_cancels_the_others(
    make_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sim = make_sim(seed=75, projects=12, shared_projects=0, days=1, ops_per_project_per_day=40)
    from exporter.simulator import Faults

    sim.faults = Faults(p_slow=1.0, slow_seconds=0.3)
    first = sorted(sim.project_ids())[0]
    from exporter.engine import walk as _walk

    real_run = _walk.ProjectWalk.run

    def run(self: Any) -> Any:
        if self.pid == first:
            raise RuntimeError("a bug in one worker")
        return real_run(self)

    monkeypatch.setattr(_walk.ProjectWalk, "run", run)
    with pytest.raises(RuntimeError, match="a bug in one worker"):
        run_sync(sim, tmp_path, concurrency=2)
    # Without cancellation all 11 other projects would be walked (one page each).
    assert _operation_requests(sim) <= 3


# -- finding 16: the API is down for everything --------------------------------------------------------


def test_16_api_down_for_everything_stops_the_run_early(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=76, projects=60, shared_projects=0, days=1, ops_per_project_per_day=5)
    sim.fail_requests("/operations", 503)
    retry = RetryPolicy(
        max_attempts=4,
        backoff_initial=0.02,
        backoff_max=0.05,
        down_after_failures=6,
        down_after_seconds=0.2,
    )
    summary = run_sync(sim, tmp_path, retry=retry, concurrency=4)
    assert summary.outcome == "failed" and summary.exit_code == 5
    assert summary.error is not None and "failing every request" in summary.error
    # Without the stop, every project would spend its 4 attempts: 240 requests.
    assert _operation_requests(sim) < 120
    assert math.isfinite(summary.requests)


# -- a walk cut short resumes, then walks again from the newest -------------------------------------


def test_resumed_walk_also_reads_what_arrived_meanwhile(make_sim: Any, tmp_path: Path) -> None:
    """A backfill cut mid-walk resumes from its cursor; operations created in between sit
    above its top, so the run that finishes it walks again from the newest (no loss)."""
    sim, pid = _one_project(make_sim, seed=77)
    for _ in range(12):
        sim.add_operations(pid, 5, same_second=True)
        sim.advance(1)
    limits = WalkLimits(page_size=5, flush_rows=10)
    sim.fail_requests(f"/projects/{pid}/operations", 400, after=6)
    cut = run_sync(sim, tmp_path, limits=limits)
    assert cut.outcome == "partial" and pid in cut.errors  # its first pages are committed
    sim.clear_failures()
    sim.advance(5)
    sim.add_operations(pid, 3, same_second=True)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


# -- late arrivals in the checkpoint's second, across a page boundary ------------------------------


@pytest.mark.parametrize("late", [1, 3, 4])
def test_late_arrivals_in_the_checkpoint_second_across_pages(
    make_sim: Any, tmp_path: Path, late: int
) -> None:
    """Operations created in the checkpoint's second after a sync sit above the ones it saw:
    with a small page, they fill whole pages whose oldest operation is still in that second.
    The walk goes on until a strictly older second (stopping at `<=` would lose them)."""
    sim, pid = _one_project(make_sim, seed=78)
    sim.add_operations(pid, 3, same_second=True)
    sim.advance(1)
    sim.add_operations(pid, 2, same_second=True)
    limits = WalkLimits(page_size=2, flush_rows=4)
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    sim.add_operations(pid, late, same_second=True)  # the clock has not moved: same second
    seconds = {o["created_at"] for o in sim.ground_truth([pid]).values()}
    assert len(seconds) == 2
    assert run_sync(sim, tmp_path, limits=limits).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


# -- a finished operation is read once more: it may still change in place ----------------------------


def test_a_finished_operation_stays_tracked_while_it_settles(make_sim: Any, tmp_path: Path) -> None:
    """Seen for the first time already `finished` (total_duration_ms 0), read again seconds
    later (a killed run and its re-run), then filled in place with the same updated_at
    (PRODUCT.md): it stays tracked until it has been finished for the settling window by its
    updated_at (issue 19, finding 18: one more read was not enough), even when it is too deep
    for the next walk to pass it; once settled and unchanged, it is forgotten."""
    sim = empty_sim(make_sim, 79, at_now=True)
    clock = sim_clock(sim)
    pid = sim.project_ids()[0]
    sim.advance(1)
    [op_id] = sim.add_operations(pid, 1, status="finished")
    sim.update_operation(op_id, total_duration_ms=0)
    sim.advance(2)  # not in the walk's own second (above its ceiling: tracked for that alone)
    limits = WalkLimits(page_size=3, flush_rows=3, max_extend_pages=0, max_gets=10)
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    first = latest_raw(tmp_path)[op_id]
    sim.advance(1)
    sim.add_operations(pid, 8, same_second=False)  # pushes it below the next walk's page
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    sim.advance(60)
    sim.update_operation(op_id, total_duration_ms=31, updated_at=first["updated_at"])
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    assert latest_raw(tmp_path)[op_id]["total_duration_ms"] == 31
    con = sqlite3.connect(tmp_path / "state.sqlite")
    tracked = "SELECT count(*) FROM open_ops WHERE id = ?"
    assert con.execute(tracked, (op_id,)).fetchone() == (1,)  # changed in place: settles again
    sim.advance(15 * 60)
    assert run_sync(sim, tmp_path, limits=limits, clock=clock).outcome == "ok"
    assert con.execute(tracked, (op_id,)).fetchone() == (0,)  # settled and unchanged: forgotten
    con.close()
    assert_matches_truth(sim, tmp_path)


# -- the checkpoint's second, when its newest operation came with a fraction ------------------------


def test_whole_second_arrivals_after_a_fractional_checkpoint(make_sim: Any, tmp_path: Path) -> None:
    """The newest operation of a walk came as `...08.841+02:00` (an exact instant); operations
    created later in that second come as whole seconds (`...08Z`, which parses to before it).
    Compared by whole second they are new; compared to the microsecond they would be lost."""
    sim, pid = _one_project(make_sim, seed=80)
    sim.add_operations(pid, 3, same_second=True)
    sim.advance(1)
    burst = sim.add_operations(pid, 2, same_second=True)
    sim.fractional_created_at(burst[-1])
    assert run_sync(sim, tmp_path).outcome == "ok"
    later = sim.add_operations(pid, 2, same_second=True)  # same second, later instants
    assert all(sim.ground_truth([pid])[i]["created_at"].endswith("Z") for i in later)
    assert run_sync(sim, tmp_path).outcome == "ok"
    assert_matches_truth(sim, tmp_path)


# -- an operation created "in the future" (a node's clock, a bad record) -----------------------------


def _stamp(seconds: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _created(op_id: str, seconds: int, **fields: Any) -> dict[str, Any]:
    """A finished operation created at `seconds` (and updated then, unless given)."""
    stamp = _stamp(seconds)
    return {
        "id": op_id,
        "project_id": "p-1",
        "action": "start_compute",
        "status": "finished",
        "created_at": stamp,
        "updated_at": stamp,
        **fields,
    }


class _Served(LoopbackApi):
    """p-1's operations: `ops`, newest first, on one page."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[dict[str, Any]] = []

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        return 200, {"operations": self.ops}


def test_an_operation_created_in_the_future_does_not_blind_its_project(tmp_path: Path) -> None:
    """One operation created in 2099 (a bad record, finished long ago) moved the checkpoint
    to 2099: every later operation was older, each walk stopped at once, nothing exported, exit
    0, for ever. The checkpoint stops at what the API can have served (the walk's start, by the
    API's clock); the future operation is exported once, stays tracked while above it (no second
    copy), and its change is a new version. A run that finds nothing new reads one page."""
    now = int(time.time())
    # Finished and updated 20 minutes ago: past the settling window, nothing tracks it but that.
    future = _created("op-future", 4_070_908_800, updated_at=_stamp(now - 1200))  # 2099-01-01
    older = _created("op-a", now - 100)
    api = _Served()
    expected: list[tuple[str, int]] = []
    with serving(api) as base_url:
        for served, added in (
            ([future, older], [("op-a", 1), ("op-future", 1)]),
            ([future, _created("op-b", now - 50), older], [("op-b", 1)]),
            (
                [
                    {**future, "total_duration_ms": 5, "updated_at": _stamp(now - 1000)},
                    _created("op-c", now - 20),
                    _created("op-b", now - 50),
                    older,
                ],
                [("op-c", 1), ("op-future", 2)],
            ),
            (None, []),  # nothing new
        ):
            api.ops = api.ops if served is None else served
            api.log.clear()
            summary = _loopback_sync(base_url, tmp_path, page_size=1000)
            assert (summary.outcome, summary.errors) == ("ok", {})
            expected = sorted(expected + added)
            assert sorted((r["id"], r["version"]) for r in read_versions(tmp_path)) == expected
        assert [path for path, _ in api.log].count("/projects/p-1/operations") == 1
    assert summary.new_operations == summary.changed_operations == 0


def test_an_operation_ahead_of_the_clock_joins_the_checkpoint_once_passed(tmp_path: Path) -> None:
    """An operation ten minutes ahead (a node's clock) stays tracked while above the walk's
    ceiling, then, once the clock has passed it, is the checkpoint (its id a boundary id) and is
    forgotten: no second copy, before or after, and what came in between is exported."""
    from exporter.engine.sync import sync

    now = int(time.time())
    ahead = _created("op-ahead", now + 600, updated_at=_stamp(now - 1200))
    older = _created("op-a", now - 100)
    api = _Served()
    clock = [now]
    expected: list[tuple[str, int]] = []
    with serving(api) as base_url:
        config = SyncConfig(
            tmp_path,
            LOOPBACK_KEY,
            base_url,
            max_rps=None,
            retry=FAST,
            clock=lambda: clock[0] * 1_000_000,
        )
        for at, served, added in (
            (now, [ahead, older], [("op-a", 1), ("op-ahead", 1)]),
            (now + 300, [ahead, _created("op-b", now + 250), older], [("op-b", 1)]),
            (
                now + 700,
                [ahead, _created("op-c", now + 550), _created("op-b", now + 250), older],
                [("op-c", 1)],
            ),
            (now + 710, None, []),
        ):
            clock[0] = at
            api.ops = api.ops if served is None else served
            api.log.clear()
            summary = sync(config)
            assert (summary.outcome, summary.errors) == ("ok", {})
            expected = sorted(expected + added)
            assert sorted((r["id"], r["version"]) for r in read_versions(tmp_path)) == expected
            assert ("op-ahead" in _tracked(tmp_path)) == (at < now + 700)
        assert [path for path, _ in api.log].count("/projects/p-1/operations") == 1
    con = sqlite3.connect(tmp_path / "state.sqlite")
    row = con.execute("SELECT checkpoint_us, boundary_ids FROM projects").fetchone()
    con.close()
    assert (row[0], json.loads(row[1])) == ((now + 600) * 1_000_000, ["op-ahead"])


def test_with_project_the_ceiling_waits_for_the_apis_clock(tmp_path: Path) -> None:
    """`--project` sends no listing before the walk: the ceiling was set before any Date header
    was read, with a minute allowed for skew, so an operation 30 s ahead (a node's clock) became
    the checkpoint and one created after it but stamped earlier was never exported (exit 0).
    The first page's Date header sets it."""
    from exporter.engine.sync import sync

    now = int(time.time())
    ahead, older = _created("op-ahead", now + 30), _created("op-a", now - 100)
    api = _Served()
    with serving(api) as base_url:
        config = SyncConfig(
            tmp_path, LOOPBACK_KEY, base_url, max_rps=None, retry=FAST, project_ids=["p-1"]
        )
        for served in ([ahead, older], [ahead, _created("op-new", now + 2), older]):
            api.ops = served
            summary = sync(config)
            assert (summary.outcome, summary.errors) == ("ok", {})
    assert sorted(r["id"] for r in read_versions(tmp_path)) == ["op-a", "op-ahead", "op-new"]


def test_a_checkpoint_an_older_opsaudit_took_from_the_future_fails_its_project(
    tmp_path: Path,
) -> None:
    """A checkpoint in 2099 that an opsaudit before the ceiling stored: every operation created
    since is older, and each run exported nothing and said ok. Which of them the dataset holds
    cannot be told from the state: the project fails, saying what happened and what to do."""
    now = int(time.time())
    api = _Served()
    with serving(api) as base_url:
        api.ops = [_created("op-a", now - 100)]
        assert _loopback_sync(base_url, tmp_path, page_size=1000).outcome == "ok"
        con = sqlite3.connect(tmp_path / "state.sqlite")
        with con:
            con.execute("UPDATE projects SET checkpoint_us = ?", (4_070_908_800 * 1_000_000,))
        con.close()
        api.ops = [_created("op-b", now - 50), *api.ops]
        api.log.clear()
        summary = _loopback_sync(base_url, tmp_path, page_size=1000)
        assert [path for path, _ in api.log].count("/projects/p-1/operations") == 0
    assert summary.errors == {
        "p-1": "project p-1: its checkpoint (2099-01-01T00:00:00Z) lies ahead of the API's "
        "clock: an older opsaudit took it from an operation created in the future, and "
        "operations created since may be missing from the trail; nothing is read for it: sync "
        "into a new --data-dir to export its whole history again"
    }
    assert [r["id"] for r in read_versions(tmp_path)] == ["op-a"]


def test_an_operation_created_in_the_future_that_the_api_dropped_is_no_longer_tracked(
    tmp_path: Path,
) -> None:
    """An operation created in 2099, tracked for that, then dropped by the API (its GET 404):
    no retention deletes it, so the rule for gone operations (a retention's age) never held, and
    each run GET it for ever. Three misses, as for any, and it is no longer tracked."""
    now = int(time.time())
    future = _created("op-future", 4_070_908_800, updated_at=_stamp(now - 1200))
    older = _created("op-a", now - 2000)  # settled: not tracked
    api = _Served()
    gets = []
    with serving(api) as base_url:
        for served in ([future, older], [older], [older], [older], [older]):
            api.ops = served
            api.log.clear()
            assert _loopback_sync(base_url, tmp_path, page_size=1000).outcome == "ok"
            gets.append([path for path, _ in api.log].count("/projects/p-1/operations/op-future"))
    assert gets == [0, 1, 1, 1, 0]
    assert _tracked(tmp_path) == []
    assert sorted(r["id"] for r in read_versions(tmp_path)) == ["op-a", "op-future"]


def _tracked(data_dir: Path) -> list[str]:
    con = sqlite3.connect(data_dir / "state.sqlite")
    try:
        return [r[0] for r in con.execute("SELECT id FROM open_ops ORDER BY id")]
    finally:
        con.close()


@pytest.mark.parametrize(
    ("mark", "encoding", "end"),
    [
        (b"", "utf-8-sig", "\n"),  # an editor's byte-order mark (utf-8-sig writes it)
        (codecs.BOM_UTF16_LE, "utf-16-le", "\r\n"),  # PowerShell's `>`
        (codecs.BOM_UTF16_BE, "utf-16-be", ""),
    ],
)
def test_a_key_file_saved_with_a_byte_order_mark_is_read(
    make_sim: Any, tmp_path: Path, mark: bytes, encoding: str, end: str
) -> None:
    """The BOM was read as part of the key ("malformed", exit 3); UTF-16 exited 5, "a bug"."""
    sim = make_sim(seed=74, projects=1, shared_projects=0, days=1, ops_per_project_per_day=3)
    key_file = tmp_path / "key"
    key_file.write_bytes(mark + (sim.personal_key + end).encode(encoding))
    args = ["sync", "--data-dir", str(tmp_path / "data"), "--base-url", sim.base_url]
    result = CliRunner().invoke(
        cli, [*args, "--api-key-file", str(key_file), "--max-rps", "0"], env={"NEON_API_KEY": ""}
    )
    assert result.exit_code == 0, result.output


def test_a_key_file_that_is_not_text_is_a_usage_error(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_bytes(b"napi_\xff\xfe\xfd\n")
    result = CliRunner().invoke(
        cli,
        ["sync", "--data-dir", str(tmp_path / "data"), "--api-key-file", str(key_file)],
        env={"NEON_API_KEY": ""},
    )
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: --api-key-file {key_file} is not text (UTF-8): save the key as plain text\n",
    )
    assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("command", ["sync", "doctor"])
@pytest.mark.parametrize(
    "given",
    [
        "the key",  # --api-key-file "$NEON_API_KEY": the key where its file's path goes
        "c7txwvaape2hwqdypw7dxo1rwdq7dyb3be6h5i1uw2gasr9mzlyno7luofa0evwh",  # a key, not set
        "napi_4f8a0c29bd7e61f3a5c2d9e08b17f4c6",
    ],
)
def test_a_key_given_for_its_files_path_is_never_shown(
    tmp_path: Path, command: str, given: str
) -> None:
    """`--api-key-file "$NEON_API_KEY"` printed the key whole ("cannot read --api-key-file
    <the key>: No such file or directory"), into cron's mail and the log."""
    key = "xq3v9kz0bm2w8r7t5y1u4p6o0a9s8d7f6g5h4j3k2l1zxcvbnmqwertyuiopasd"
    if given == "the key":
        given = key
    args = [command, "--data-dir", str(tmp_path / "data"), "--api-key-file", given]
    result = CliRunner().invoke(cli, args, env={"NEON_API_KEY": key}, catch_exceptions=False)
    problem = (
        "--api-key-file: no such file, and what was given looks like an API key, not a file's "
        "path (not shown)"
    )
    fix = "write the key to a file and give that file's path, or set NEON_API_KEY"
    assert given not in result.output
    if command == "sync":
        assert (result.exit_code, result.stderr) == (2, f"Error: {problem}: {fix}\n")
    else:  # doctor says it as a finding and goes on with the other checks
        assert result.exit_code == 8
        assert result.stdout.splitlines()[1] == f"error key: {problem} Fix: {fix}"


def test_a_missing_key_files_path_is_still_named(tmp_path: Path) -> None:
    """Only what looks like a key is held back: a mistyped path is named, as before."""
    missing = tmp_path / "keys" / "neon-prod.key"
    args = ["sync", "--data-dir", str(tmp_path / "data"), "--api-key-file", str(missing)]
    result = CliRunner().invoke(cli, args, env={"NEON_API_KEY": ""})
    assert (result.exit_code, result.stderr) == (
        2,
        f"Error: cannot read --api-key-file {missing}: No such file or directory\n",
    )


class _Repeating(LoopbackApi):
    """Serves the same full page of operations under a new cursor each time (a cursor the
    server ignores), `times` times (None: for ever), then an empty page."""

    def __init__(self, page: list[dict[str, Any]], times: int | None) -> None:
        super().__init__()
        self.page, self.times, self.served = page, times, 0

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        if self.times is not None and self.served == self.times:
            return 200, {"operations": []}
        self.served += 1
        return 200, {"operations": self.page, "pagination": {"cursor": f"c{self.served}"}}


def _loopback_sync(base_url: str, data_dir: Path, page_size: int) -> Any:
    from exporter.engine.sync import sync

    limits = WalkLimits(page_size=page_size, flush_rows=page_size * 3)
    config = SyncConfig(data_dir, LOOPBACK_KEY, base_url, max_rps=None, retry=FAST, limits=limits)
    return sync(config)


@pytest.mark.parametrize("times", [3, None])
def test_the_same_page_served_again_under_a_new_cursor_fails_the_project(
    tmp_path: Path, times: int | None
) -> None:
    """The same full page under fresh cursors was stored again (3 copies then an empty page:
    2000 rows for 1000 ids, exit 0), or walked for ever (a cursor never repeated: millions of
    rows, the lock held): the second copy is a loop, the project fails, none of it stored."""
    api = _Repeating([loopback_operation(i) for i in range(10)], times)
    with serving(api) as base_url:
        summary = _loopback_sync(base_url, tmp_path, page_size=10)
    assert summary.errors == {"p-1": "project p-1: the server served the same page again (loop)"}
    assert [path for path, _ in api.log].count("/projects/p-1/operations") == 2
    assert sorted(r["id"] for r in read_versions(tmp_path)) == [f"op-{i:06d}" for i in range(10)]


class _BranchesForEver(LoopbackApi):
    """The same branch under a new `next` each time; ten operations."""

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        if path.endswith("/branches"):
            served = int(query.get("cursor", "n0")[1:]) + 1
            branch = {"id": "br-1", "name": "main", "project_id": "p-1"}
            return 200, {"branches": [branch], "pagination": {"next": f"n{served}"}}
        return super().answer(path, query)

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        return 200, {"operations": [loopback_operation(i) for i in range(10)]}


def test_the_same_branches_page_served_again_fails_the_project(tmp_path: Path) -> None:
    """The branches listing, served again under a new `pagination.next` each time, was read for
    ever (the run hung, its lock held: every later cron run exited 4); its operations walk
    refused the same thing. The project fails, its operations committed."""
    from exporter.engine.sync import sync

    api = _BranchesForEver()
    with serving(api) as base_url:
        # A budget ends the loop when it is not refused (a hang otherwise): outcome budget.
        config = SyncConfig(tmp_path, LOOPBACK_KEY, base_url, max_rps=None, retry=FAST)
        summary = sync(dataclasses.replace(config, time_budget=5.0))
    assert summary.errors == {
        "p-1": "project p-1: GET /projects/{id}/branches: the server served the same page "
        "again (loop)"
    }
    assert [path for path, _ in api.log].count("/projects/p-1/branches") == 2
    assert sorted(r["id"] for r in read_versions(tmp_path)) == [f"op-{i:06d}" for i in range(10)]


class _MostlyRepeats(LoopbackApi):
    """Pages of 10 after the first: the first page's first 9 operations again and one new."""

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        served = int(query.get("cursor", "c0")[1:])
        if served == 3:
            return 200, {"operations": []}
        first = [loopback_operation(i) for i in range(10)]
        page = first if served == 0 else [*first[:9], loopback_operation(9 + served)]
        return 200, {"operations": page, "pagination": {"cursor": f"c{served + 1}"}}


def test_a_page_of_repeats_is_compared_with_the_whole_page_before(tmp_path: Path) -> None:
    """Overlapping pages are deduplicated against the whole page before: against the ids it
    kept, a page that kept one left the next page's repeats for new (stored twice)."""
    api = _MostlyRepeats()
    with serving(api) as base_url:
        summary = _loopback_sync(base_url, tmp_path, page_size=10)
    assert summary.errors == {}
    assert sorted(r["id"] for r in read_versions(tmp_path)) == [f"op-{i:06d}" for i in range(12)]


class _Undecodable(LoopbackApi):
    """p-bad's operations page is the given bytes (a 200, its length right); the others are
    healthy."""

    projects = ("p-bad", "p-good1", "p-good2")

    def __init__(self, body: bytes) -> None:
        super().__init__()
        self.body = body

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        if project_id == "p-bad":
            return 200, self.body
        return 200, {"operations": [loopback_operation(0, project_id)]}


@pytest.mark.parametrize(
    "body",
    [
        b'{"operations":[{"id":"a\xff","created_at":"2025-01-16T21:02:04Z"}]}',
        b'{"operations":[{"id":"a","created_at":"2025-01-16T21:02:04Z"}',
    ],
    ids=["not-utf8", "json-cut-short"],
)
def test_a_page_that_is_not_utf8_is_retried_then_fails_its_project_alone(
    tmp_path: Path, body: bytes
) -> None:
    """A byte that is not UTF-8 in an operations page was a UnicodeDecodeError out of the
    client (msgspec < 0.23; its DecodeError since): "a bug", exit 5, the healthy projects not
    yet committed lost, in every run after. It is a malformed body, as JSON cut short is:
    retried, then that project fails and the others sync."""
    api = _Undecodable(body)
    with serving(api) as base_url:
        summary = _loopback_sync(base_url, tmp_path, page_size=1000)
    assert summary.errors == {
        "p-bad": "GET /projects/{project_id}/operations kept failing after 3 attempts: "
        "malformed or truncated JSON body"
    }
    assert [path for path, _ in api.log].count("/projects/p-bad/operations") == 3
    assert sorted(r["project_id"] for r in read_versions(tmp_path)) == ["p-good1", "p-good2"]


class _NoAction(LoopbackApi):
    """Three operations, the second with no `action`."""

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        ops = [loopback_operation(i) for i in range(3)]
        del ops[1]["action"]
        return 200, {"operations": ops}


def test_an_operation_without_an_action_has_an_empty_action_label(tmp_path: Path) -> None:
    """Its metrics label was Python's text for no value, `action="None"` (one action more
    for every dashboard): empty, which PromQL reads as no label."""
    import datetime as dt

    from exporter.ops.metrics import collect_metrics, render_metrics

    with serving(_NoAction()) as base_url:
        assert _loopback_sync(base_url, tmp_path, page_size=1000).errors == {}
    as_of = dt.datetime(2025, 1, 17, tzinfo=dt.timezone.utc)  # the operations' last day
    text = render_metrics(collect_metrics(tmp_path, as_of=as_of))
    assert [line for line in text.splitlines() if line.startswith("opsaudit_operations_24h")] == [
        'opsaudit_operations_24h{action="start_compute"} 2',
        'opsaudit_operations_24h{action=""} 1',
    ]
