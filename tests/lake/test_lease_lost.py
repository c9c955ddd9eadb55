"""Issue 19, finding 6: a writer lease lost while other walks still run ends the sync with the
lease's exit code (4), not the follow-on "cannot commit" of the walks (6, "state corrupt")."""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pytest

from exporter import ExitCode, LockHeldError
from exporter.simulator import Faults
from exporter.store.lake import LeaseLostError

from .conftest import Bucket, run_sync


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
