"""Helpers for the sync engine tests: syncs of the simulator (make_sim, tests/conftest.py) on
loopback and ways to read the data back."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import orjson

from exporter.engine.sync import RunSummary, SyncConfig, sync
from exporter.engine.walk import WalkLimits


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
