"""Delta tables with the state beside them: commit, txn readback, restore, conflicts, readers."""

from __future__ import annotations

import re
import sqlite3
from datetime import timedelta
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest

from exporter import ConfigError, StorageError
from exporter.store.lake import LakeDataset, LeaseLostError, parse_location

from .conftest import lakedata


def _state(path: Path, value: int) -> Path:
    path.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    with con:
        con.execute("CREATE TABLE s (v INTEGER)")
        con.execute("INSERT INTO s VALUES (?)", (value,))
    con.close()
    return path


def _state_value(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        return int(con.execute("SELECT v FROM s").fetchone()[0])
    finally:
        con.close()


def _ids(ds: LakeDataset) -> list[str]:
    snap = ds.snapshot("operation_versions")
    return [] if snap is None else sorted(snap.to_table(columns=["id"])["id"].to_pylist())


def test_commit_and_txn_readback(root: Any, tmp_path: Path, make_versions: Any) -> None:
    ds = root.open()
    assert ds.committed_version() is None
    assert ds.restore_state(tmp_path / "fresh.sqlite") is None
    for n in (1, 2, 3):
        result = ds.commit(make_versions(n - 1, 20), _state(tmp_path / "s.sqlite", n * 10), n)
        assert (result.txn_version, result.rows, result.already) == (n, 20, False)
    assert ds.committed_version() == 3
    # An empty batch still moves the state (checkpoints advance without new rows).
    ds.commit(make_versions(0, 0), _state(tmp_path / "s.sqlite", 40), 4)

    # A fresh machine: new objects, nothing local; the state of batch 4 comes back.
    again = root.open(create=False)
    assert again.dataset_id == ds.dataset_id
    assert again.committed_version() == 4
    target = tmp_path / "elsewhere" / "state.sqlite"
    assert again.restore_state(target) == 4
    assert _state_value(target) == 40
    assert _ids(again) == sorted(f"op-{n:08d}" for n in range(60))
    months = again.snapshot("operation_versions").to_table(columns=["created_month"])
    assert sorted(set(months["created_month"].to_pylist())) == ["2024-01", "2024-02", "2024-03"]


def test_commit_refuses_stale_or_gapped_versions(
    root: Any, tmp_path: Path, make_versions: Any
) -> None:
    ds = root.open()
    ds.commit(make_versions(0, 5), _state(tmp_path / "s.sqlite", 1), 1)
    with pytest.raises(StorageError, match="already committed"):
        ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 1)
    with pytest.raises(StorageError, match="does not follow"):
        ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 3)
    assert ds.committed_version() == 1
    assert len(_ids(ds)) == 5


def test_two_writers_same_batch_one_commit_wins(
    root: Any, tmp_path: Path, make_versions: Any
) -> None:
    """Two writers (say a zombie whose lease expired and its successor) both hold a snapshot at
    batch 1 and both commit batch 2: the conditional log write plus Delta's txn conflict check
    let exactly one through; the other gets LeaseLostError and leaves no state behind."""
    a = root.open()
    a.commit(make_versions(0, 5), _state(tmp_path / "a.sqlite", 1), 1)
    b = root.open(create=False)
    assert b.committed_version() == 1  # b's snapshot is at batch 1 ...
    a.commit(make_versions(1, 5), _state(tmp_path / "a.sqlite", 2), 2)  # ... a moves on to 2
    with pytest.raises(LeaseLostError, match="concurrently"):
        b.commit(make_versions(7, 5), _state(tmp_path / "b.sqlite", 99), 2)
    states = [m.key for m in b.objects.list("_opsaudit/state/")]
    assert [k.split("/")[-1][:12] for k in states] == ["000000000001", "000000000002"]
    fresh = root.open(create=False)
    assert fresh.committed_version() == 2
    assert _ids(fresh) == sorted(f"op-{n:08d}" for n in range(10))
    assert fresh.restore_state(tmp_path / "r.sqlite") == 2
    assert _state_value(tmp_path / "r.sqlite") == 2


def test_conditional_log_write_on_s3(bucket: Any, tmp_path: Path, make_versions: Any) -> None:
    """The Delta log entry is created with If-None-Match: * (S3 conditional write, no DynamoDB),
    and moto refuses a second create of the same log entry with 412."""
    from obstore.exceptions import AlreadyExistsError

    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    bucket.server.reset_log()
    ds.commit(make_versions(0, 5), _state(tmp_path / "s.sqlite", 1), 1)
    puts = [r for r in bucket.server.log() if r[0] == "PUT"]
    log_puts = [r for r in puts if "/_delta_log/" in r[1]]
    state_puts = [r for r in puts if "/_opsaudit/state/" in r[1]]
    assert log_puts and all(r[3] == "*" for r in log_puts), log_puts
    assert state_puts and all(r[3] == "*" for r in state_puts), state_puts
    store = ds.objects.store  # type: ignore[attr-defined]
    import obstore

    with pytest.raises(AlreadyExistsError):
        obstore.put(
            store, "operation_versions/_delta_log/00000000000000000000.json", b"{}", mode="create"
        )


def test_readers_agree(bucket: Any, tmp_path: Path, make_versions: Any) -> None:
    import polars as pl
    from deltalake import DeltaTable

    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    for n in range(1, 4):
        ds.commit(make_versions(n - 1, 30), _state(tmp_path / "s.sqlite", n), n)
    uri = bucket.url() + "/operation_versions"
    expected = sorted(f"op-{n:08d}" for n in range(90))

    by_delta = DeltaTable(uri, storage_options=ds.options).to_pyarrow_table(columns=["id"])
    by_polars = pl.read_delta(uri, storage_options=ds.options).select("id")
    by_polars_lazy = pl.scan_delta(uri, storage_options=ds.options).select("id").collect()
    con = duckdb.connect()
    con.register("operation_versions", ds.snapshot("operation_versions"))
    by_duckdb = [
        r[0] for r in con.execute("SELECT id FROM operation_versions ORDER BY id").fetchall()
    ]
    assert sorted(by_delta["id"].to_pylist()) == expected
    assert sorted(by_polars["id"].to_list()) == expected
    assert sorted(by_polars_lazy["id"].to_list()) == expected
    assert by_duckdb == expected
    # typed timestamps and the partition column survive the round trip
    row = con.execute(
        "SELECT typeof(created_at), typeof(created_date), created_month FROM operation_versions "
        "WHERE id = 'op-00000000'"
    ).fetchone()
    assert row == ("TIMESTAMP WITH TIME ZONE", "DATE", "2024-01")


def test_replace_small_tables(root: Any) -> None:
    ds = root.open()
    t1 = pa.table({"id": ["p1", "p2"], "name": ["a", "b"]})
    t2 = pa.table({"id": ["p1", "p2", "p3"], "name": ["a", "b", "c"]})
    ds.replace_table("projects", t1)
    ds.replace_table("projects", t2)
    assert sorted(ds.snapshot("projects").to_table()["id"].to_pylist()) == ["p1", "p2", "p3"]
    with pytest.raises(ValueError):
        ds.replace_table("operation_versions", t1)


def test_compact_and_vacuum_keep_readers_safe(
    root: Any, tmp_path: Path, make_versions: Any
) -> None:
    ds = root.open()
    # eight small batches into one month -> eight files in one partition
    for n in range(1, 9):
        ds.commit(
            make_versions(n - 1, 10, month=__import__("datetime").date(2024, 5, 1)),
            _state(tmp_path / "s.sqlite", n),
            n,
        )
    before_files = ds.file_uris("operation_versions")
    assert len(before_files) == 8
    reader = ds.snapshot("operation_versions")  # a reader holding the old snapshot
    metrics = ds.compact()
    assert metrics["numFilesRemoved"] == 8 and metrics["numFilesAdded"] == 1
    assert len(ds.file_uris("operation_versions")) == 1
    assert ds.committed_version() == 8  # optimize keeps the txn
    # default retention: nothing removed yet, the old reader still reads its snapshot
    assert ds.vacuum() == []
    assert reader.count_rows() == 80
    with pytest.raises(ConfigError, match="below"):
        ds.vacuum(retention=timedelta(minutes=5))
    assert len(ds.vacuum(retention=timedelta(0), force=True, dry_run=True)) == 8
    removed = ds.vacuum(retention=timedelta(0), force=True)
    assert len(removed) == 8
    assert sorted(_ids(ds)) == sorted(f"op-{n:08d}" for n in range(80))


def test_commit_whose_answer_was_lost(bucket: Any, tmp_path: Path, make_versions: Any) -> None:
    """The log entry is written but the writer gets a 500: delta-rs retries, finds the entry
    taken, and the commit is recognised as ours (it names our state object): already=True, and
    the next batch follows on."""
    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    ds.commit(make_versions(0, 5), _state(tmp_path / "s.sqlite", 1), 1)
    bucket.server.arm(0, "PUT", r"/operation_versions/_delta_log/0+1\.json$", "lose-answer")
    result = ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 2)
    assert result.already and result.txn_version == 2
    ds.commit(make_versions(2, 5), _state(tmp_path / "s.sqlite", 3), 3)
    fresh = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    assert fresh.restore_state(tmp_path / "r.sqlite") == 3
    assert _ids(fresh) == sorted(f"op-{n:08d}" for n in range(15))


def test_a_lost_answer_to_the_state_upload_is_ours(
    bucket: Any, tmp_path: Path, make_versions: Any
) -> None:
    """The state object's upload landed but was answered 500; the client's retry got 412 (the
    object was there): the commit failed, exit 6 with the object's name for a reason. Its key
    is new to this attempt (a random token), so the object there is ours."""
    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    ds.commit(make_versions(0, 5), _state(tmp_path / "s.sqlite", 1), 1)
    bucket.server.arm(0, "PUT", r"/_opsaudit/state/", "lose-answer")
    result = ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 2)
    assert (result.already, result.txn_version) == (False, 2)
    fresh = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    assert fresh.restore_state(tmp_path / "r.sqlite") == 2
    assert _ids(fresh) == sorted(f"op-{n:08d}" for n in range(10))


@pytest.mark.parametrize("table", ["projects", "superseded"])
def test_a_table_write_whose_answer_was_lost_is_ours(
    bucket: Any, tmp_path: Path, table: str
) -> None:
    """An overwrite of a table rebuilt from the state (projects, sync_runs, the names tables)
    or the superseded record's append lands, but its answer is lost (a 500 after S3 applied
    it): the client's retry finds the log entry taken and delta-rs reports our own commit as
    a concurrent one. The run failed, exit 6 "a concurrent transaction deleted data this
    operation read" (the overwrite), or exit 4 "another writer recorded batch 2 concurrently"
    (the record) with no other writer anywhere. Now the commit is recognised as ours by its
    token, as the operation_versions commit is by its state object."""
    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    lease = ds.lease()
    lease.acquire()
    ds.commit(lakedata.versions(0, 10), _state(tmp_path / "s.sqlite", 1), 1, lease=lease)
    entry = rf"/{table}/_delta_log/0+1\.json$"  # the table's second commit
    bucket.server.reset_log()
    bucket.server.arm(0, "PUT", entry, "lose-answer")
    if table == "projects":
        ds.replace_table("projects", pa.table({"id": ["p1"]}), lease=lease)  # creates it
        rows = pa.table({"id": ["p1", "p2"]})
        assert ds.replace_table("projects", rows, lease=lease) == 1
        assert sorted(ds.snapshot("projects").to_table()["id"].to_pylist()) == ["p1", "p2"]
    else:
        batch = lakedata.versions_with_later(1, 10)  # version 2 of five operations of batch 1
        result = ds.commit(batch, _state(tmp_path / "s.sqlite", 2), 2, lease=lease)
        assert (result.txn_version, result.already) == (2, False)
        assert ds.snapshot("superseded").count_rows() == lakedata.LATER
    puts = [r for r in bucket.server.log() if r[0] == "PUT" and re.search(entry, r[1])]
    assert len(puts) == 2  # the lost answer, then the client's retry refused as taken
    lease.release()
    fresh = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    assert fresh.restore_state(tmp_path / "r.sqlite") == (1 if table == "projects" else 2)
    assert len(_ids(fresh)) == (10 if table == "projects" else 25)


def test_state_in_wal_mode_is_uploaded_whole(root: Any, tmp_path: Path, make_versions: Any) -> None:
    """The state database runs in WAL mode: rows still in its -wal file are in the upload, and
    a restore never replays a stale -wal left beside the target."""
    state = tmp_path / "state.sqlite"
    con = sqlite3.connect(state, isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE s (v INTEGER)")
    con.execute("INSERT INTO s VALUES (42)")  # stays in state.sqlite-wal
    assert (tmp_path / "state.sqlite-wal").stat().st_size > 0
    ds = root.open()
    ds.commit(make_versions(0, 3), state, 1)
    con.close()
    target = tmp_path / "restored" / "state.sqlite"
    target.parent.mkdir()
    (target.parent / "state.sqlite-wal").write_bytes(b"stale wal of another database")
    assert root.open(create=False).restore_state(target) == 1
    assert not (target.parent / "state.sqlite-wal").exists()
    assert _state_value(target) == 42


def test_readers_never_delete_a_writers_next_state(
    root: Any, tmp_path: Path, make_versions: Any
) -> None:
    ds = root.open()
    ds.commit(make_versions(0, 3), _state(tmp_path / "s.sqlite", 1), 1)
    in_flight = "_opsaudit/state/000000000002-inflight.sqlite"  # uploaded, commit not yet made
    ds.objects.put(in_flight, b"x", if_none_match=True)
    reader = root.open(create=False)
    assert reader.restore_state(tmp_path / "r.sqlite") == 1
    assert reader.objects.get(in_flight) is not None  # a reader (status, query) deletes nothing
    writer = root.open(create=False)
    lease = writer.lease()
    lease.acquire()
    assert writer.restore_state(tmp_path / "w.sqlite", lease=lease) == 1
    assert writer.objects.get(in_flight) is None  # the writer at its start cleans up
    lease.release()


@pytest.mark.parametrize("failed_reads", [1, 2, "always"])
def test_landed_commit_whose_history_read_fails(
    bucket: Any, tmp_path: Path, make_versions: Any, failed_reads: int | str
) -> None:
    """Issue 19: the append lands but raises (its answer lost), and the history read that tells
    whether it landed fails too. The state object the landed commit names was deleted, and every
    later run exited 6. Now: a read that fails once or twice is retried (the commit is ours,
    already=True); one that keeps failing fails the commit and deletes nothing. Either way the
    dataset stays readable and the next run continues from batch 2."""
    from exporter.store.lake.tables import CommitUnknownError

    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    ds.commit(make_versions(0, 5), _state(tmp_path / "s.sqlite", 1), 1)
    log_entry = r"/operation_versions/_delta_log/0+1\.json$"  # batch 2's Delta commit
    bucket.server.arm(0, "PUT", log_entry, "lose-answer")
    # Reading the table from scratch (what the history read does, and delta-rs' write does not)
    # starts with _last_checkpoint: each denied GET fails one history read.
    first_read = r"/operation_versions/_delta_log/_last_checkpoint$"
    bucket.server.deny("GET", first_read, times=50 if failed_reads == "always" else failed_reads)
    bucket.server.reset_log()
    if failed_reads == "always":
        with pytest.raises(CommitUnknownError) as err:
            ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 2)
        assert err.value.exit_code == 5
        assert "could not be read; its state object _opsaudit/state/000000000002-" in str(err.value)
        bucket.server.disarm()
    else:
        result = ds.commit(make_versions(1, 5), _state(tmp_path / "s.sqlite", 2), 2)
        assert (result.txn_version, result.table_version, result.already) == (2, 1, True)
        reads = [r for r in bucket.server.log() if r[0] == "GET" and r[1].endswith("checkpoint")]
        assert len(reads) == failed_reads + 1  # the denied reads, then one that answered
        bucket.server.disarm()
    # The next run, on a fresh machine: batch 2 is the committed state, and it goes on.
    again = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    lease = again.lease()
    lease.acquire()
    assert again.restore_state(tmp_path / "next.sqlite", lease=lease) == 2
    assert _state_value(tmp_path / "next.sqlite") == 2
    assert _ids(again) == sorted(f"op-{n:08d}" for n in range(10))
    result = again.commit(make_versions(2, 5), _state(tmp_path / "s.sqlite", 3), 3, lease=lease)
    assert (result.txn_version, result.already) == (3, False)
    lease.release()
    reader = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    assert reader.restore_state(tmp_path / "read.sqlite") == 3
    assert _ids(reader) == sorted(f"op-{n:08d}" for n in range(15))
