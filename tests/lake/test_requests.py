"""Object-store requests per operation, measured on the S3 server (figures in docs/lake-design.md)."""

from __future__ import annotations

import collections
import sqlite3
from pathlib import Path
from typing import Any

from exporter.store.lake import LakeDataset, parse_location

from .conftest import lakedata, run_sync

BATCHES = 10


def test_requests_per_commit(bucket: Any, tmp_path: Path, make_versions: Any) -> None:
    state = tmp_path / "s.sqlite"
    sqlite3.connect(state).close()
    server = bucket.server
    server.reset_log()
    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    opened = len(server.log())
    server.reset_log()
    lease = ds.lease()
    lease.acquire()
    n = ds.restore_state(state, lease=lease) or 0
    startup = lakedata.count_requests(server.log())
    server.reset_log()
    ds.commit(make_versions(0, 100), state, n + 1, lease=lease)  # creates the table
    first = len(server.log())
    server.reset_log()
    for b in range(1, BATCHES):
        # one month per batch: one data file per commit
        ds.commit(make_versions(b, 100), state, n + 1 + b, lease=lease)
    steady = server.log()
    per_commit = lakedata.count_requests(steady)
    server.reset_log()
    ds.commit(make_versions(0, 0), state, n + 1 + BATCHES, lease=lease)  # no new rows
    empty = lakedata.count_requests(server.log())
    server.reset_log()
    lease.renew()
    lease.release()
    lease_ops = len(server.log())
    server.reset_log()
    again = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    successor = again.lease()
    successor.acquire()
    again.restore_state(tmp_path / "r.sqlite", lease=successor)
    restore = lakedata.count_requests(server.log())

    print(f"\nopen (marker + probe, new dataset): {opened} requests")
    print(f"lease + restore on a new dataset: {dict(startup)}")
    print(f"first commit (creates the table): {first} requests")
    total = sum(per_commit.values())
    print(f"{BATCHES - 1} commits: {total} requests, {total / (BATCHES - 1):.1f} per commit")
    print(f"  by kind: {dict(per_commit)}")
    print(f"empty commit: {sum(empty.values())} {dict(empty)}")
    print(f"lease renew + release: {lease_ops}")
    print(f"restore on a fresh machine ({BATCHES + 1} commits in the log): {dict(restore)}")
    # Regression bounds (measured: see docs/lake-design.md)
    assert per_commit["PUT data"] == BATCHES - 1
    assert per_commit["PUT state"] == BATCHES - 1
    assert per_commit["PUT log"] == BATCHES - 1
    assert total / (BATCHES - 1) <= 12
    assert sum(empty.values()) <= 8
    assert lease_ops == 2


def test_a_no_change_sync_makes_one_commit(make_sim: Any, bucket: Any) -> None:
    """Walk checkpoints and unchanged re-reads carry no rows: they ride on the one state upload
    before the projects and sync_runs tables are rewritten (was: a commit of their own too)."""
    sim = make_sim(
        seed=8, projects=3, days=1, ops_per_project_per_day=60, live_ops_per_project_per_hour=0
    )
    url, options = bucket.url("no-change"), bucket.storage_options()
    assert run_sync(sim, url, options).outcome == "ok"
    bucket.server.reset_log()
    assert run_sync(sim, url, options).outcome == "ok"
    puts = collections.Counter(
        path.split("/")[3] + " " + lakedata.request_kind(path, "control", "list")
        for method, path, *_ in bucket.server.log()
        if method == "PUT"
    )
    assert puts == {
        "_opsaudit control": 3,  # the lease: taken, named with its run (`note_run`), released
        "_opsaudit state": 1,
        "operation_versions log": 1,
        "projects data": 1,
        "projects log": 1,
        "sync_runs data": 1,
        "sync_runs log": 1,
    }
