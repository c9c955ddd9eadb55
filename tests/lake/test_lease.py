"""The writer lease: conditional create/replace, expiry a dead holder cannot keep, renewal."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from exporter import ExitCode, LockHeldError
from exporter.store.lake import LeaseLostError

TTL = timedelta(seconds=0.5)


def _grace(ds: Any) -> timedelta:
    # S3 Last-Modified has whole seconds: the grace must cover that truncation (5 s by default).
    return timedelta(seconds=0.1 if ds.location.is_local else 1.0)


def _lease(ds: Any, holder: str, ttl: timedelta = TTL) -> Any:
    lease = ds.lease(ttl=ttl, holder=holder)
    lease.grace = _grace(ds)
    return lease


def _expiry(ds: Any) -> float:
    return (TTL + _grace(ds)).total_seconds() + (0.05 if ds.location.is_local else 1.0)


def test_race_one_taker_wins(root: Any) -> None:
    ds = root.open()
    takers = [_lease(root.open(), f"taker-{i}", ttl=timedelta(seconds=30)) for i in range(6)]
    barrier = threading.Barrier(len(takers))
    results: dict[str, bool] = {}

    def take(lease: Any) -> None:
        barrier.wait()
        results[lease.holder] = lease.try_acquire()

    threads = [threading.Thread(target=take, args=(lease,)) for lease in takers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    winners = [h for h, won in results.items() if won]
    assert len(winners) == 1, results
    info = ds.lease().read()
    assert info is not None and info.holder == winners[0]


def test_live_lease_not_stolen_expired_lease_taken(root: Any) -> None:
    ds = root.open()
    holder = _lease(ds, "holder")
    holder.acquire()
    other = _lease(root.open(), "other")
    with pytest.raises(LockHeldError) as err:
        other.acquire()
    assert err.value.exit_code == ExitCode.LOCKED
    assert "holder" in str(err.value)
    # The holder dies without releasing (no more renewals): after ttl + grace it is free.
    time.sleep(_expiry(ds))
    other.acquire()
    assert other.held
    # The old holder is fenced: its renewal fails, and check() refuses before any commit.
    with pytest.raises(LeaseLostError):
        holder.renew()
    with pytest.raises(LeaseLostError):
        holder.check()


def test_renewal_keeps_the_lease(root: Any) -> None:
    ds = root.open()
    holder = _lease(ds, "holder")
    holder.acquire()
    holder.start_heartbeat(0.1)
    try:
        time.sleep(_expiry(ds))
        other = _lease(root.open(), "other")
        assert not other.try_acquire()
        holder.check()
    finally:
        holder.release()
    # released: taken at once, no waiting for expiry
    assert other.try_acquire()
    other.release()


def test_fencing_without_renewal(root: Any) -> None:
    holder = _lease(root.open(), "holder")
    holder.acquire()
    holder.check()
    time.sleep(TTL.total_seconds())
    with pytest.raises(LeaseLostError, match="not renewed"):
        holder.check()


def test_wait_queues_behind_the_holder(root: Any) -> None:
    holder = _lease(root.open(), "holder")
    holder.acquire()
    threading.Timer(0.3, holder.release).start()
    waiter = _lease(root.open(), "waiter")
    started = time.monotonic()
    waiter.acquire(wait=True, timeout=10, poll=0.05)
    assert time.monotonic() - started < 5
    waiter.release()


_HOLD = """
import sys, time
from datetime import timedelta
from exporter.store.lake import parse_location, LakeDataset
ds = LakeDataset.open(parse_location(sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])), create=True)
lease = ds.lease(ttl=timedelta(seconds=0.5), holder="victim")
lease.acquire()
lease.start_heartbeat(0.1)
print("held", flush=True)
time.sleep(60)
"""


def test_holder_killed_with_sigkill_loses_the_lease(root: Any, tmp_path: Path) -> None:
    script = tmp_path / "hold.py"
    script.write_text(_HOLD)
    args = [f"{k}={v}" for k, v in root.options.items()]
    proc = subprocess.Popen(
        [sys.executable, str(script), root.url, *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        time.sleep(0.7)  # longer than its ttl, but it renews: still held
        successor = _lease(root.open(), "successor")
        assert not successor.try_acquire()
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        successor.acquire(wait=True, timeout=10, poll=0.1)
        assert successor.held
        successor.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


_HOLD_LONG = """
import sys, time
from datetime import timedelta
from exporter.store.lake import parse_location, LakeDataset
ds = LakeDataset.open(parse_location(sys.argv[1], dict(a.split("=", 1) for a in sys.argv[2:])), create=True)
lease = ds.lease(ttl=timedelta(seconds=120))
lease.acquire()
print("held", flush=True)
time.sleep(60)
"""


def _forged(ds: Any, **fields: Any) -> None:
    """A lease object as another holder would have written it (ttl 120 s, just renewed)."""
    import json

    from exporter.store.lake import Lease

    body = json.loads(Lease(ds.objects, ttl=timedelta(seconds=120))._body())
    body.update(token="someone-else", holder=fields.pop("holder", "elsewhere:1"), **fields)
    current = ds.lease().read()
    if current is None:
        ds.objects.put("_opsaudit/lease.json", json.dumps(body).encode(), if_none_match=True)
    else:
        ds.objects.put("_opsaudit/lease.json", json.dumps(body).encode(), if_match=current.etag)


def test_a_killed_holder_of_this_machine_is_taken_over_at_once(root: Any, tmp_path: Path) -> None:
    """Issue 19: after kill -9 of a writer, the next one on the same machine waited out the
    lease's ttl (124 s measured with a sync's default ttl). Its process is gone: taken at once."""
    script = tmp_path / "hold.py"
    script.write_text(_HOLD_LONG)
    args = [f"{k}={v}" for k, v in root.options.items()]
    proc = subprocess.Popen(
        [sys.executable, str(script), root.url, *args],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "held"
        successor = root.open().lease(ttl=timedelta(seconds=120))
        assert not successor.try_acquire()  # alive: its lease stands
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        started = time.monotonic()
        assert successor.try_acquire()  # one attempt, no waiting for the 120 s ttl
        assert time.monotonic() - started < 5
        info = successor.read()
        assert info is not None and (info.pid, info.token) == (os.getpid(), successor.token)
        successor.release()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_reused_pid_does_not_keep_a_dead_holders_lease(root: Any) -> None:
    """The holder's pid now runs another process (it started at another time): taken at once;
    the same pid with the holder's start time is the holder, alive: refused."""
    from exporter.store.lake.lease import process_started

    ds = root.open()
    me = ds.lease(ttl=timedelta(seconds=120))
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as other:
        try:
            alive = {"machine": me.machine, "pid": other.pid}
            _forged(ds, started=process_started(other.pid), **alive)
            assert not me.try_acquire()
            _forged(ds, started="1", **alive)  # the holder's process started at boot: not this one
            assert me.try_acquire()
            me.release()
        finally:
            other.kill()


def test_a_dead_holder_of_another_machine_must_expire(root: Any) -> None:
    """Another machine's pids say nothing here; nor does a lease without a holder's start time
    (an older opsaudit). Both keep the lease until it expires."""
    ds = root.open()
    me = ds.lease(ttl=timedelta(seconds=120))
    with subprocess.Popen([sys.executable, "-c", "pass"]) as gone:
        gone.wait()
    assert me.machine is not None  # Linux: /proc tells
    other_machine = me.machine.replace("/", "-other/", 1)
    _forged(ds, machine=other_machine, pid=gone.pid, started="1")
    assert not me.try_acquire()
    _forged(ds, machine=None, pid=None, started=None)
    assert not me.try_acquire()
    _forged(ds, machine=me.machine, pid=gone.pid, started="1")
    assert me.try_acquire()  # the same record from this machine: its process is gone
    me.release()


def test_naming_the_run_while_the_heartbeat_renews_never_loses_the_lease(root: Any) -> None:
    """`note_run` and the heartbeat renewed at once with the same etag: the loser's 412 read as
    the lease taken over (the run stopped, exit 4, with no other writer). 18 of 40 lost it."""
    ds = root.open()
    for trial in range(20):
        lease = _lease(ds, f"holder-{trial}", ttl=timedelta(seconds=30))
        lease.acquire()
        lease.start_heartbeat(interval=0.005)
        try:
            time.sleep(0.002 * (trial % 5))
            lease.note_run(f"run-{trial}", trial)
            time.sleep(0.03)
            lease.check()  # what every commit does first
        finally:
            lease.release()
        info = ds.lease().read()
        assert info is not None and (info.run_id, info.released) == (f"run-{trial}", True)


def test_a_lost_answer_to_our_own_lease_write_keeps_the_lease(bucket: Any) -> None:
    """The store applied the PUT but answered 500; its client sent it again and got 412 (our
    own write was there). Taking the lease read that as another sync holding it (exit 4,
    naming this very process, the lease left behind); a renewal read it as the lease taken
    over (the run stopped, recorded `killed`). Both are ours: the lease is held."""
    from exporter.store.lake import LakeDataset, parse_location

    ds = LakeDataset.open(parse_location(bucket.url(), bucket.options), create=True)
    lease = ds.lease(ttl=timedelta(seconds=30), holder="me")
    bucket.server.arm(0, "PUT", r"/_opsaudit/lease\.json$", "lose-answer")
    lease.acquire()
    assert lease.held
    bucket.server.arm(0, "PUT", r"/_opsaudit/lease\.json$", "lose-answer")
    lease.note_run("run-1", 1)  # a renewal
    lease.check()
    other = ds.lease(ttl=timedelta(seconds=30), holder="other")
    assert not other.try_acquire()
    info = ds.lease().read()
    assert info is not None and (info.holder, info.run_id, info.released) == ("me", "run-1", False)
    lease.release()
    assert other.try_acquire()  # released as ever
    other.release()


def test_an_ended_run_is_handed_on_by_a_holder_killed_before_it_renewed(root: Any) -> None:
    """A run the store refused is named, ended, in the lease it released. The next holder
    wrote its lease without it, and named it only from its first renewal on: killed before
    that (while restoring a large state), it dropped the record, and the refused run was
    gone for good from `sync_runs`, `status` and the metrics."""
    from exporter.store.lake.lease import Ended

    ds = root.open()
    refused = _lease(ds, "refused", ttl=timedelta(seconds=30))
    refused.acquire()
    ended = Ended("run-refused", 1, 2, "failed", "access denied")
    refused.release(ended)
    killed = _lease(root.open(), "killed")  # takes it, then dies before any renewal
    killed.acquire()
    info = ds.lease().read()
    assert info is not None and info.unrecorded == (ended,)
    time.sleep(_expiry(ds))
    after = _lease(root.open(), "after")
    after.acquire()
    assert after.unrecorded == [ended]
    after.release()


def test_a_renewal_over_an_earlier_write_of_ours_whose_answer_was_lost(root: Any) -> None:
    """A heartbeat renewal landed but its answer never came (a timeout, not retried): the
    etag held is stale. The next renewal's 412 took the write there for this one, so
    `note_run` returned without the lease naming the run; the run is named now."""
    ds = root.open()
    lease = _lease(ds, "holder", ttl=timedelta(seconds=30))
    lease.acquire()
    stale = lease._etag
    ds.objects.put(lease.key, lease._body(), if_match=stale)  # landed, answer lost
    lease.note_run("run-1", 1)
    lease.check()
    info = ds.lease().read()
    assert info is not None and (info.holder, info.run_id, info.released) == (
        "holder",
        "run-1",
        False,
    )
    other = _lease(root.open(), "other", ttl=timedelta(seconds=30))
    assert not other.try_acquire()
    lease.release()
    info = ds.lease().read()
    assert info is not None and info.released


@pytest.mark.parametrize("skew", [300, -300])
def test_a_taker_whose_clock_is_off_judges_expiry_by_the_stores_clock(root: Any, skew: int) -> None:
    """Expiry was the lease's Last-Modified (the store's clock) plus ttl and a 5 s grace,
    compared with the taker's own clock: a machine 300 s ahead took a live sync's lease at once
    (the live run exited 6 on a table write, recorded `killed`), one 300 s behind waited 300 s
    more. Judged on the store's clock, a live lease stands and an expired one is taken."""
    from datetime import datetime, timezone

    ds = root.open()
    holder = _lease(ds, "holder")
    holder.acquire()
    taker = _lease(root.open(), "taker")
    taker.clock = lambda: datetime.now(timezone.utc) + timedelta(seconds=skew)
    assert not taker.try_acquire()
    with pytest.raises(LockHeldError):
        taker.acquire()
    holder.check()  # still ours
    time.sleep(_expiry(ds))  # the holder stopped renewing: expired
    assert taker.try_acquire()
    with pytest.raises(LeaseLostError):
        holder.renew()
    taker.release()


@pytest.mark.parametrize("root", ["s3"], indirect=True)
def test_a_reader_whose_clock_is_ahead_shows_a_live_run_running(
    root: Any, make_sim: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader cannot learn the store's clock (its credentials may be read-only): judged by
    its own clock 300 s ahead, a live run's lease looked expired, the run read `killed`, and
    `check` said last_run_failed (exit 8) while the sync ran. A reader allows 10 minutes."""
    from click.testing import CliRunner

    import exporter.store.readers as readers
    from exporter.cli import cli
    from exporter.store.lake import Lease, open_dataset

    from .conftest import run_sync

    sim = make_sim(seed=71, projects=1, shared_projects=0, days=1, ops_per_project_per_day=20)
    opts = root.bucket.storage_options()
    assert run_sync(sim, root.url, opts).outcome == "ok"
    ds = open_dataset(root.url, root.options)
    live = Lease(ds.objects, ttl=timedelta(seconds=120), holder="machine-b:4242")
    assert live.try_acquire()
    live.note_run("r-live", 1_800_000_000_000_000)

    class Ahead(datetime):
        @classmethod
        def now(cls, tz: Any = None) -> Any:
            return datetime.now(tz) + timedelta(seconds=300)

    monkeypatch.setattr(readers, "datetime", Ahead)
    try:
        flags = [arg for o in opts for arg in ("--storage-option", o)]
        status = CliRunner().invoke(
            cli, ["status", "--data-dir", root.url, *flags, "--format", "json"]
        )
    finally:
        live.release()
    assert status.exit_code == 0, status.output
    runs = {r["run_id"]: r["outcome"] for r in json.loads(status.stdout)["runs"]}
    assert runs["r-live"] == "running"
