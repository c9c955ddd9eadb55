"""Helpers for the sync engine tests: syncs of the simulator (make_sim, tests/conftest.py) on
loopback, a tiny API for answers the simulator never gives, and ways to read the data back."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import duckdb
import orjson

from exporter.engine.sync import RunSummary, SyncConfig, sync
from exporter.engine.walk import WalkLimits


class LoopbackApi:
    """The answers of a tiny API: a key in no organization listing `projects` on one page, no
    branches or endpoints; a test overrides the route it makes misbehave. An answer is a status
    and a body (bytes as they are, anything else as JSON)."""

    projects: tuple[str, ...] = ("p-1",)

    def __init__(self) -> None:
        self.log: list[tuple[str, dict[str, str]]] = []  # (path, query) of every request

    def answer(self, path: str, query: dict[str, str]) -> tuple[int, Any]:
        parts = path.removeprefix("/api/v2/").split("/")
        if parts == ["users", "me", "organizations"]:
            return 200, {"organizations": []}
        if parts == ["projects"]:
            return self.list_projects(query)
        if parts == ["projects", "shared"]:
            return 200, {"projects": []}
        if len(parts) == 3 and parts[0] == "projects" and parts[1] in self.projects:
            if parts[2] == "operations":
                return self.operations(parts[1], query)
            return 200, {parts[2]: []}
        return 404, {"code": "", "message": "not found"}

    def list_projects(self, query: dict[str, str]) -> tuple[int, Any]:
        listed = [] if "cursor" in query else self.projects
        return 200, {"projects": [listing_project(pid) for pid in listed]}

    def operations(self, project_id: str, query: dict[str, str]) -> tuple[int, Any]:
        return 200, {"operations": []}


def listing_project(project_id: str) -> dict[str, Any]:
    """A project as `GET /projects` lists it."""
    stamp = "2025-01-01T00:00:00Z"
    return {"id": project_id, "name": project_id, "created_at": stamp, "updated_at": stamp}


def loopback_operation(i: int, project_id: str = "p-1") -> dict[str, Any]:
    """Operation `i` of a history newest first: one second older per `i`."""
    stamp = f"2025-01-16T{20 - i // 3600:02d}:{59 - i // 60 % 60:02d}:{59 - i % 60:02d}Z"
    return {
        "id": f"op-{i:06d}",
        "project_id": project_id,
        "action": "start_compute",
        "status": "finished",
        "created_at": stamp,
        "updated_at": stamp,
    }


class _LoopbackHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: Any

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query).items()}
        api: LoopbackApi = self.server.api
        api.log.append((url.path.removeprefix("/api/v2"), query))
        status, body = api.answer(url.path, query)
        data = body if isinstance(body, bytes) else orjson.dumps(body)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@contextlib.contextmanager
def serving(api: LoopbackApi) -> Iterator[str]:
    """`api` on loopback: yields its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _LoopbackHandler)
    server.api = api  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/api/v2"
    finally:
        server.shutdown()
        server.server_close()


def run_sync(sim: Any, data_dir: Path, key: str | None = None, **kwargs: Any) -> RunSummary:
    """One sync against the simulator, unpaced, with fast retries."""
    from exporter.api.client import RetryPolicy

    kwargs.setdefault("max_rps", None)
    kwargs.setdefault("retry", RetryPolicy(max_attempts=12, backoff_initial=0.01, backoff_max=0.05))
    kwargs.setdefault("commit_seconds", 0.2)
    # The suite checks the strict guarantee after each sync (every open operation re-read, so
    # `operations` equals the API): `--refresh-open-every 0`. Tests of the schedule pass a
    # bound and the simulator's clock (`sim_clock`).
    kwargs.setdefault("refresh_open_every", 0)
    page_size = kwargs.pop("page_size", None)
    if page_size is not None:
        kwargs["limits"] = WalkLimits(page_size=page_size, flush_rows=max(page_size * 3, 10))
    kwargs.setdefault("base_url", sim.base_url)
    config = SyncConfig(data_dir=data_dir, api_key=key or sim.personal_key, **kwargs)
    return sync(config)


def empty_project_sim(make_sim: Any, **kwargs: Any) -> tuple[Any, str]:
    """One project with no history and no live arrivals: the test writes every operation."""
    kwargs.setdefault("seed", 90)
    sim = make_sim(
        projects=1,
        shared_projects=0,
        orgs=1,
        days=0,
        ops_per_project_per_day=0,
        live_ops_per_project_per_hour=0,
        **kwargs,
    )
    return sim, sim.project_ids()[0]


def sim_clock(sim: Any) -> Callable[[], int]:
    """The simulator's virtual clock as a sync's clock (`SyncConfig.clock`): what is fresh,
    hot or due is then judged on the time the test moves with `sim.advance`."""
    return lambda: int(sim.world.clock_us)


def read_versions(data_dir: Path) -> list[dict[str, Any]]:
    """Every row of operation_versions, read straight from the Parquet files."""
    from exporter.store.local.reader import committed_files

    # What readers read: the state's list of committed files (DESIGN.md, commit protocol).
    listed = committed_files(data_dir)
    files = (
        list((data_dir / "operation_versions").glob("*/*.parquet"))
        if listed is None
        else [data_dir / f for f in listed]
    )
    if not files:
        return []
    con = duckdb.connect()
    rel = con.execute(
        "SELECT * FROM read_parquet(?, hive_partitioning = true) ORDER BY id, version",
        [[str(f) for f in files]],
    )
    cols = [d[0] for d in rel.description]
    return [dict(zip(cols, row)) for row in rel.fetchall()]


def latest_raw(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Op id -> the latest stored state's raw JSON; fails on a duplicate (id, version)."""
    rows = read_versions(data_dir)
    keys = [(r["id"], r["version"]) for r in rows]
    assert len(keys) == len(set(keys)), "an (id, version) pair appears twice"
    latest: dict[str, dict[str, Any]] = {}
    for r in rows:  # ordered by id, version
        latest[r["id"]] = orjson.loads(r["raw"])
    return latest


def assert_no_identical_versions(data_dir: Path) -> None:
    seen: set[tuple[str, str]] = set()
    for r in read_versions(data_dir):
        key = (r["id"], r["raw"])
        assert key not in seen, f"identical version twice for {r['id']}"
        seen.add(key)


def assert_matches_truth(sim: Any, data_dir: Path, project_ids: list[str] | None = None) -> None:
    truth = sim.ground_truth(project_ids)
    latest = latest_raw(data_dir)
    if project_ids is not None:
        latest = {k: v for k, v in latest.items() if v["project_id"] in set(project_ids)}
    missing = set(truth) - set(latest)
    extra = set(latest) - set(truth)
    assert not missing, f"{len(missing)} operations missing, e.g. {sorted(missing)[:3]}"
    assert not extra, f"{len(extra)} unexpected operations, e.g. {sorted(extra)[:3]}"
    differing = [k for k in truth if truth[k] != latest[k]]
    assert not differing, (
        f"{len(differing)} operations differ, e.g. {truth[differing[0]]} vs {latest[differing[0]]}"
    )


def empty_sim(make_sim: Any, seed: int, projects: int = 1, *, at_now: bool = False) -> Any:
    """Projects with no history and no live arrivals: the test writes every operation. With
    `at_now` the simulated clock starts at the wall clock (for what is "fresh" or "recent")."""
    kwargs: dict[str, Any] = {}
    if at_now:
        from datetime import datetime, timezone

        kwargs["start"] = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    return make_sim(
        seed=seed,
        projects=projects,
        shared_projects=0,
        orgs=1,
        days=0,
        ops_per_project_per_day=0,
        live_ops_per_project_per_hour=0,
        **kwargs,
    )
