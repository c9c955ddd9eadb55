"""Issue 19, finding 6: a writer lease lost while other walks still run ends the sync with the
lease's exit code (4), not the follow-on "cannot commit" of the walks (6, "state corrupt")."""

from __future__ import annotations

import json
import re
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from exporter import ExitCode, LockHeldError
from exporter.simulator import Faults
from exporter.store.lake import LeaseLostError

from .conftest import Bucket, run_sync, wait_for


def test_a_lease_taken_over_mid_run_exits_4(
    make_sim: Any, bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPSAUDIT_LEASE_TTL", "3")  # renewed every second: the loss shows fast
    sim = make_sim(
        seed=1906, projects=60, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=40
    )
    # Every answer takes a while: walks are still running when the lease is gone.
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.15)
    url = bucket.url("lost")
    prefix = url.split("/", 3)[3]
    client = bucket.client()
    stolen = threading.Event()

    def take_over() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            # The run has committed operations: its walks are under way. (Any `_delta_log/`
            # came too early once the run named itself in the lease at its start: the theft
            # was found there, before any walk, and no follow-on error could arise.)
            if any("operation_versions/_delta_log/" in k for k in bucket.list_keys(prefix)):
                break
            time.sleep(0.05)
        body = {"holder": "other-host:1", "token": "other", "ttl_s": 600, "released": False}
        client.put_object(
            Bucket=bucket.name, Key=f"{prefix}/_opsaudit/lease.json", Body=json.dumps(body)
        )
        stolen.set()

    thief = threading.Thread(target=take_over, daemon=True)
    thief.start()
    with pytest.raises(LockHeldError) as err:
        run_sync(sim, url, bucket.storage_options(), concurrency=4, commit_seconds=0.05)
    thief.join()
    assert stolen.is_set()
    assert err.value.exit_code == ExitCode.LOCKED
    assert "the writer lease on" in str(err.value) and "was lost" in str(err.value)


def test_a_table_write_conflicting_with_the_writer_that_took_the_lease_exits_4(
    root: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lease taken over and the new holder's commit to a table landing between our
    snapshot and our write: Delta refused ours ("a concurrent transaction deleted data this
    operation read"), a storage error, exit 6, for what is the lease lost (exit 4)."""
    import deltalake

    ds = root.open()
    lease = ds.lease(ttl=timedelta(seconds=30), holder="holder")
    lease.acquire()
    rows = pa.table({"id": ["p1"], "name": ["a"]})
    ds.replace_table("projects", rows, lease=lease)
    write = deltalake.write_deltalake

    def racing(target: Any, data: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(deltalake, "write_deltalake", write)
        thief = root.open()
        taken = thief.lease().read()
        body = {"holder": "other-host:1", "token": "other", "ttl_s": 600, "released": False}
        thief.objects.put("_opsaudit/lease.json", json.dumps(body).encode(), if_match=taken.etag)
        thief.replace_table("projects", rows)
        return write(target, data, **kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", racing)
    with pytest.raises(LeaseLostError) as err:
        ds.replace_table("projects", rows, lease=lease)
    assert err.value.exit_code == ExitCode.LOCKED
    assert str(err.value) == (
        f"the writer lease on {ds.location.display} was lost (taken over by another writer); "
        "stopping before any commit"
    )


def test_a_commit_landing_after_its_lease_was_taken_over_keeps_the_dataset_whole(
    bucket: Bucket, tmp_path: Path
) -> None:
    """Writer A's Delta commit of batch 2 stalls in the store (a PUT held, or retried by the
    client for minutes) past its lease's expiry; B takes the expired lease over (A may be
    alive: its lease is not released, its process not dead), restores batch 1 and deleted
    A's state object of batch 2 as an orphan; then A's commit landed, naming it. Every later
    run exited 6: "batch 2 is committed but its state object ... is missing". Now B keeps the
    state objects above the committed batch of a holder that may be alive: A's commit stands,
    B's of the same batch is refused, and the next writer restores A's."""
    from exporter.store.lake import LakeDataset, parse_location

    from .conftest import lakedata
    from .test_tables import _ids, _state, _state_value

    def open_ds() -> LakeDataset:
        return LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)

    a = open_ds()
    lease_a = a.lease(ttl=timedelta(seconds=4), holder="a")
    lease_a.grace = timedelta(seconds=1)
    lease_a.acquire()
    a.commit(lakedata.versions(0, 10), _state(tmp_path / "a.sqlite", 1), 1, lease=lease_a)
    lease_a.renew()  # no heartbeat: the lease expires 5 s after this
    bucket.server.delay("PUT", r"/operation_versions/_delta_log/0+1\.json$", 9.0)  # batch 2
    landed: list[Any] = []

    def commit_a() -> None:
        state = _state(tmp_path / "a.sqlite", 2)
        landed.append(a.commit(lakedata.versions(1, 10), state, 2, lease=lease_a))

    stalled = threading.Thread(target=commit_a)
    stalled.start()
    b = open_ds()
    lease_b = b.lease(ttl=timedelta(seconds=30), holder="b")
    lease_b.grace = timedelta(seconds=1)
    lease_b.acquire(wait=True, timeout=30, poll=0.2)  # A's lease expired, A still committing
    assert lease_b.taken_from is not None and lease_b.taken_from.holder == "a"
    assert b.restore_state(tmp_path / "b.sqlite", lease=lease_b) == 1
    stalled.join()
    assert [r.txn_version for r in landed] == [2]  # A's commit landed, after B's restore
    with pytest.raises(LeaseLostError, match="another writer committed batch 2 concurrently"):
        b.commit(lakedata.versions(1, 10), _state(tmp_path / "b.sqlite", 2), 2, lease=lease_b)
    lease_b.release()
    fresh = LakeDataset.open(parse_location(bucket.url(), bucket.options))
    assert fresh.restore_state(tmp_path / "next.sqlite") == 2
    assert _state_value(tmp_path / "next.sqlite") == 2
    assert _ids(fresh) == sorted(f"op-{n:08d}" for n in range(20))


def test_a_writer_stalled_past_its_lease_whose_commit_landed_first_says_so(
    make_sim: Any, bucket: Bucket, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sync stalls past its lease's ttl + grace (its heartbeat's renewal and its commit held
    in the store 9 s); B takes the expired lease over; A's commit lands (B commits nothing), then
    A finds the lease gone. It said "stopping before any commit": false, its batches stand and
    the next run continues from them. Exit 4: the lease was taken over (README)."""
    from exporter.store.lake import LakeDataset, parse_location

    monkeypatch.setenv("OPSAUDIT_LEASE_TTL", "3")
    sim = make_sim(
        seed=1906, projects=60, shared_projects=0, orgs=1, days=1, ops_per_project_per_day=40
    )
    sim.faults = Faults(p_slow=1.0, slow_seconds=0.15)
    url = bucket.url("stalled")
    prefix = url.split("/", 3)[3]
    failed: list[BaseException] = []

    def run_a() -> None:
        try:
            run_sync(sim, url, bucket.storage_options(), concurrency=4, commit_seconds=0.05)
        except BaseException as exc:
            failed.append(exc)

    a = threading.Thread(target=run_a)
    a.start()
    deadline = time.monotonic() + 60
    while not any("operation_versions/_delta_log/" in k for k in bucket.list_keys(prefix)):
        assert time.monotonic() < deadline and a.is_alive()
        time.sleep(0.05)
    bucket.server.reset_log()
    commit = r"/operation_versions/_delta_log/\d+\.json$"
    bucket.server.delay("PUT", commit, 9.0)  # A's next commit, held in the store

    def held() -> bool:
        return any(e[0] == "PUT" and re.search(commit, e[1]) for e in bucket.server.log())

    wait_for(held, 30)
    bucket.server.delay("PUT", r"/_opsaudit/lease\.json$", 9.0)  # and its heartbeat's renewal
    b = LakeDataset.open(parse_location(url, bucket.options))
    lease_b = b.lease(holder="b")
    lease_b.acquire(wait=True, timeout=30, poll=0.2)  # A's expired: A still committing
    assert lease_b.taken_from is not None and lease_b.taken_from.run_id is not None
    a.join(60)
    lease_b.release()
    assert not a.is_alive()
    [err] = failed
    assert isinstance(err, LeaseLostError) and err.exit_code == ExitCode.LOCKED
    # Its first commit, any before the delay was armed, and the one held: landed, all A's.
    last = LakeDataset.open(parse_location(url, bucket.options)).committed_version()
    assert last is not None and last >= 2
    assert re.fullmatch(
        rf"the writer lease on {re.escape(url)} was lost \((not renewed for \d+s \(ttl 3s\)|"
        rf"taken over by another writer); b holds it now\) after this run's commits of batches "
        rf"1-{last} landed: they stand; nothing more is committed, and the next run goes on "
        rf"after batch {last}",
        str(err),
    ), str(err)
