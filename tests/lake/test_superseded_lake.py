"""The superseded record on object storage (issue 24, exporter/store/lake/superseded.py): the commit
of batch N that adds version n+1 of an operation records (id, n) in the `superseded` Delta table
just before its `operation_versions` commit; readers keep the rows of the batches their versions
snapshot holds. A kill between the two commits leaves every reader exact, and the next writer's
retry records the batch once. A dataset written before the record is migrated once, and every
view reads the same rows, every column, before and after."""

from __future__ import annotations

import re
import signal
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from exporter.analytics.views import connect, list_views
from exporter.store.lake import LakeDataset, parse_location

from .conftest import Bucket, lakedata, run_sync
from .test_crash import ROWS, _run_writer

# Written by opsaudit at commit d8761e2 (before the record) into S3:
# tests/assets/make_pre_superseded_lake.py says how. The object keys under the dataset prefix.
PRE_SUPERSEDED_LAKE = Path(__file__).parents[1] / "assets" / "pre-superseded-lake"
OLD_VERSIONS, OLD_OPERATIONS = 284, 260  # what that script printed


def every_view(url: str, opts: list[str]) -> dict[str, list[tuple[Any, ...]]]:
    """Every view's rows, every column, in a stable order (`age` is measured from the moment of
    the query, so it is left out)."""
    con = connect(url, storage_options=opts)
    try:
        out = {}
        for name in list_views():
            columns = [c[0] for c in con.execute(f"DESCRIBE {name}").fetchall() if c[0] != "age"]
            select = ", ".join(f'"{c}"' for c in columns)
            out[name] = sorted(con.execute(f"SELECT {select} FROM {name}").fetchall(), key=repr)
        return out
    finally:
        con.close()


def recorded(url: str, opts: dict[str, str] | list[str]) -> list[tuple[str, int, int]]:
    """Every row of the `superseded` table as the Delta log names it (txn included)."""
    ds = LakeDataset.open(parse_location(url, opts))
    snap = ds.snapshot("superseded")
    assert snap is not None, "no superseded table"
    rows = snap.to_table().to_pylist()
    return sorted((r["id"], r["version"], r["txn"]) for r in rows)


def derived(url: str, opts: dict[str, str] | list[str]) -> list[tuple[str, int]]:
    """What the record must hold: (id, version - 1) of every version after the first."""
    ds = LakeDataset.open(parse_location(url, opts))
    snap = ds.snapshot("operation_versions")
    assert snap is not None
    rows = snap.to_table(columns=["id", "version"]).to_pylist()
    return sorted((r["id"], r["version"] - 1) for r in rows if r["version"] > 1)


def operations(url: str, opts: list[str]) -> list[tuple[str, int]]:
    con = connect(url, storage_options=opts)
    try:
        return sorted(con.execute("SELECT id, version FROM operations").fetchall())
    finally:
        con.close()


def test_each_lake_commit_records_what_its_later_versions_supersede(
    make_sim: Any, bucket: Bucket
) -> None:
    sim = make_sim(
        seed=7,
        projects=2,
        shared_projects=0,
        days=2,
        ops_per_project_per_day=60,
        live_ops_per_project_per_hour=40,
    )
    url, opts = bucket.url("record"), bucket.storage_options()
    assert run_sync(sim, url, opts, commit_rows=20).outcome == "ok"
    for _ in range(3):
        sim.advance(900)
        assert run_sync(sim, url, opts, commit_rows=20).outcome == "ok"

    record = recorded(url, opts)
    assert [(i, v) for i, v, _ in record] == derived(url, opts)
    assert len(record) > 0  # operations that were open got later versions
    assert record[0][2] >= 2  # recorded by the commits after the backfill's first, not migrated
    latest = operations(url, opts)
    assert len(latest) == len({i for i, _ in latest})  # each operation exactly once
    truth = sim.ground_truth(None)
    assert sorted(truth) == [i for i, _ in latest]


def test_a_kill_between_the_record_and_the_versions_commit(bucket: Any, tmp_path: Path) -> None:
    """Killed after the record of batch 4 landed and before its versions commit: readers see
    batches 1-3 exactly (the record of 4 is not theirs); the restart records 4 once."""
    root = SimpleNamespace(url=bucket.url(), options=bucket.options)
    opts = [f"{k}={v}" for k, v in bucket.options.items()]
    batches = 6
    # The superseded table: version 0 created (empty) by the first commit, then one append per
    # later batch: the append of batch 4 is log entry 3.
    code = _run_writer(
        root,
        tmp_path / "host-0",
        arm=lambda pid: bucket.server.arm(
            pid, "PUT", r"/superseded/_delta_log/0+3\.json$", "after"
        ),
        batches=batches,
        later=True,
    )
    assert code == -signal.SIGKILL
    ds = LakeDataset.open(parse_location(root.url, root.options))
    assert ds.committed_version() == 3
    assert max(txn for _, _, txn in recorded(root.url, root.options)) == 4  # landed, not read
    assert operations(root.url, opts) == expected_latest(3)
    assert _run_writer(root, tmp_path / "host-1", batches=batches, later=True) == 0
    assert operations(root.url, opts) == expected_latest(batches)
    record = recorded(root.url, root.options)
    assert [(i, v) for i, v, _ in record] == derived(root.url, root.options)
    assert len(record) == (batches - 1) * lakedata.LATER


def test_the_cleanup_of_a_killed_attempt_whose_answer_is_lost(bucket: Any, tmp_path: Path) -> None:
    """Killed after the record of batch 4 landed: the restart first deletes that record (a
    Delta delete: log entry 4 of superseded). S3 applies it and the answer is lost (a 500);
    the client's retry finds the entry taken and delta-rs reports "a concurrent transaction
    deleted data this operation read", our own delete: the restart failed (exit 1 of the
    writer, a storage error, exit 6 in a sync). The delete whose rows are gone is done."""
    root = SimpleNamespace(url=bucket.url(), options=bucket.options)
    opts = [f"{k}={v}" for k, v in bucket.options.items()]
    batches = 6
    code = _run_writer(
        root,
        tmp_path / "host-0",
        arm=lambda pid: bucket.server.arm(
            pid, "PUT", r"/superseded/_delta_log/0+3\.json$", "after"
        ),
        batches=batches,
        later=True,
    )
    assert code == -signal.SIGKILL
    assert max(txn for _, _, txn in recorded(root.url, root.options)) == 4
    bucket.server.reset_log()
    cleanup = r"/superseded/_delta_log/0+4\.json$"
    bucket.server.arm(0, "PUT", cleanup, "lose-answer")
    assert _run_writer(root, tmp_path / "host-1", batches=batches, later=True) == 0
    sent = [e for e in bucket.server.log() if e[0] == "PUT" and re.search(cleanup, e[1])]
    assert len(sent) == 2  # applied with its answer lost, then the client's retry
    assert operations(root.url, opts) == expected_latest(batches)
    record = recorded(root.url, root.options)
    assert [(i, v) for i, v, _ in record] == derived(root.url, root.options)
    assert len(record) == (batches - 1) * lakedata.LATER


def expected_latest(committed: int) -> list[tuple[str, int]]:
    """(id, version) of each operation after `committed` batches of versions_with_later."""
    later = {f"op-{b * ROWS + i:08d}" for b in range(committed - 1) for i in range(lakedata.LATER)}
    ids = [f"op-{n:08d}" for n in range(committed * ROWS)]
    return sorted((i, 2 if i in later else 1) for i in ids)


def _upload_asset(bucket: Bucket, prefix: str) -> None:
    client = bucket.client()
    files = sorted(p for p in PRE_SUPERSEDED_LAKE.rglob("*") if p.is_file())
    assert len(files) > 20
    for path in files:
        key = f"{prefix}/{path.relative_to(PRE_SUPERSEDED_LAKE).as_posix()}"
        client.put_object(Bucket=bucket.name, Key=key, Body=path.read_bytes())


@pytest.mark.usefixtures("s3_server")
def test_a_lake_dataset_written_before_the_record_reads_the_same_after_its_migration(
    bucket: Bucket,
) -> None:
    from exporter.store.lake.store import LakeStore

    _upload_asset(bucket, "old")
    url, opts = bucket.url("old"), bucket.storage_options()
    loc = parse_location(url, opts)
    assert LakeDataset.open(loc).table("superseded") is None
    before = every_view(url, opts)
    assert len(before["operation_versions"]) == OLD_VERSIONS
    assert len(before["operations"]) == OLD_OPERATIONS

    store = LakeStore(loc)  # what a sync does first, under the lease: recover + migrate
    try:
        store.recover()
    finally:
        store.close()

    committed = LakeDataset.open(loc).committed_version()
    record = recorded(url, opts)
    assert [(i, v) for i, v, _ in record] == derived(url, opts)
    assert len(record) == OLD_VERSIONS - OLD_OPERATIONS
    assert {txn for _, _, txn in record} == {committed}
    after = every_view(url, opts)
    assert list(after) == list(before)
    for name, rows in before.items():
        assert after[name] == rows, name

    # Once: a second start writes nothing more to the record.
    table = LakeDataset.open(loc).table("superseded")
    assert table is not None and table.version() == 0
    store = LakeStore(loc)
    try:
        store.recover()
    finally:
        store.close()
    table = LakeDataset.open(loc).table("superseded")
    assert table is not None and table.version() == 0
    assert recorded(url, opts) == record
