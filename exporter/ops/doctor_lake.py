"""`doctor` of a dataset on object storage (s3://, gs://, az://): what applies there.

It checks, after the API's checks (`doctor`): the storage, reachable and readable with the
credentials of the environment; the writer lease (who holds it, expired); the Delta log of each
table (a commit file that is not JSON: `DamagedTableError`, as the readers and the sync say it);
the state object of the last committed batch (readable, its format) and the last runs, said as
of a local state file (`doctor_base`).

It only reads: no lease is taken, no object is written or deleted (not even the clock probe a
writer writes to judge the lease: the lease's expiry is judged by this machine's clock, with a
reader's grace). So write access is not tested: the first sync proves it. The state object is
copied to a local temporary directory, removed at the end.
"""

from __future__ import annotations

import datetime as dt
import shutil
from typing import Any

from exporter.analytics.format import jsonable
from exporter.core.errors import NoDatasetError, OpsauditError, StorageError
from exporter.core.layout import STATE_FILE
from exporter.core.scratch import scratch_dir
from exporter.ops.doctor_base import DoctorReport, format_found, no_state_found, runs_found
from exporter.store.lake.location import Location
from exporter.store.readers import READER_CLOCK_GRACE, require_lake, settle_reader_runs
from exporter.store.state import StateDB

__all__ = ["check_lake"]


def check_lake(report: DoctorReport, loc: Location, now: dt.datetime) -> None:
    """The findings of the dataset at `loc`; never raises for what it finds."""
    ds = _check_storage(report, loc)
    if ds is None:
        return
    if ds is _EMPTY:
        report.add("lease", "ok", "free (no sync has taken it yet)")
        no_state_found(report)
        return
    _check_lease(report, ds, now)
    from exporter.store.lake.tables import VERSIONS

    if VERSIONS not in _check_tables(report, ds):
        # Which batch is committed, so which state object is current, is read from its log.
        report.add(
            "state",
            "error",
            f"not read: the committed batch, which names the state object, is in the log of "
            f"{VERSIONS} (above)",
        )
        return
    _check_state(report, ds, now)


_EMPTY: Any = object()  # an empty prefix: no dataset yet


def _check_storage(report: DoctorReport, loc: Location) -> Any:
    """The opened dataset, _EMPTY, or None (the error said)."""
    from exporter.store.lake.objects import LakeUnreachableError

    try:
        require_lake()
        from exporter.store.lake.tables import LakeDataset  # deltalake, pyarrow

        ds = LakeDataset.open(loc)  # reads the marker (an empty prefix: lists it), no write
    except NoDatasetError:
        report.add(
            "storage",
            "ok",
            f"{loc.display} is readable and holds no dataset yet; the first sync creates it "
            "(write access is not tested: doctor writes nothing)",
        )
        return _EMPTY
    except LakeUnreachableError as exc:
        report.add(
            "storage",
            "error",
            str(exc),
            "check the endpoint (--storage-option or the environment), DNS, the network and "
            "any proxy",
        )
        return None
    except OpsauditError as exc:
        # No such bucket, no credentials or access denied, not a dataset: each says its fix.
        report.add("storage", "error", str(exc))
        return None
    report.add(
        "storage",
        "ok",
        f"{loc.display} is an opsaudit dataset, readable with these credentials (write "
        "access is not tested: doctor writes nothing)",
    )
    return ds


def _check_lease(report: DoctorReport, ds: Any, now: dt.datetime) -> None:
    try:
        info = ds.lease().read()
    except OpsauditError as exc:
        report.add("lease", "error", str(exc))
        return
    if info is None:
        report.add("lease", "ok", "free (no sync has taken it yet)")
        return
    if info.released:
        after = f", run {info.run_id}" if info.run_id else ""
        report.add("lease", "ok", f"free (released by {info.holder}{after})")
        return
    run = f" (run {info.run_id})" if info.run_id else ""
    expires = info.expires_at()
    # A reader's grace on this machine's clock (it cannot ask the store's without writing).
    expired = info.is_free(now, READER_CLOCK_GRACE)
    if expired or (info.run_id is not None and info.live_run(now, READER_CLOCK_GRACE) is None):
        why = f"expired at {jsonable(expires)}" if expired else "its process is gone"
        report.add(
            "lease",
            "warn",
            f"left by {info.holder}{run}, never released ({why}): that sync or compaction "
            "was killed",
            "nothing to do: the next sync takes the lease over and records that run as killed",
        )
        return
    if info.is_free(now):  # by this machine's clock
        _lease_expired_here(report, info, run, now)
        return
    report.add(
        "lease",
        "warn",
        f"held by {info.holder}{run}: a sync or compaction is running now (its lease runs "
        f"to {jsonable(expires)} unless renewed)",
        "nothing to do unless it never ends (a killed holder's lease expires after "
        f"{int(info.ttl.total_seconds())} s)",
    )


def _lease_expired_here(report: DoctorReport, info: Any, run: str, now: dt.datetime) -> None:
    """Expired by this machine's clock, not yet past a reader's allowance: "held, running now"
    kept an operator after a killed run waiting for nothing. The facts instead: the next sync
    judges by the store's clock, which doctor cannot read without writing."""
    expires = jsonable(info.expires_at())
    idle = int((now - info.last_modified).total_seconds())
    allowance = int(READER_CLOCK_GRACE.total_seconds())
    report.add(
        "lease",
        "warn",
        f"held by {info.holder}{run} and not renewed for {idle} s: it expired at {expires} by "
        f"this machine's clock, which may differ from the store's by up to {allowance} s (the "
        "store's decides)",
        "nothing to wait for if that sync or compaction was killed: the next sync takes the "
        f"lease over once the store's clock passes {expires} and records that run as killed "
        "(until then it exits 4; --wait queues it)",
    )


def _check_tables(report: DoctorReport, ds: Any) -> set[str]:
    """Each table's Delta log, as a reader opens it (the last checkpoint and the commits after
    it); returns the tables that could be read (or are not written yet)."""
    from exporter.store.lake.tables import TABLES, DamagedTableError

    readable: set[str] = set()
    found = 0
    for name in TABLES:
        try:
            table = ds.table(name)
        except DamagedTableError as exc:
            problem, _, fix = str(exc).partition(" Fix: ")
            report.add("tables", "error", problem, fix or None)
            continue
        except OpsauditError as exc:
            report.add("tables", "error", str(exc))
            continue
        readable.add(name)
        found += table is not None
    if len(readable) == len(TABLES):
        report.add("tables", "ok", f"the Delta logs of {found} table(s) are readable")
    return readable


def _check_state(report: DoctorReport, ds: Any, now: dt.datetime) -> None:
    """The state object of the last committed batch, copied aside (nothing deleted: without a
    lease `restore_state` only reads), its format, then the runs as a reader shows them."""
    from exporter.store.lake.tables import open_restored_state

    tmp = scratch_dir("opsaudit-doctor-")
    path = tmp / STATE_FILE
    batch = None
    try:
        try:
            batch = ds.restore_state(path)
            if batch is not None:
                state = open_restored_state(path, ds.location.display, batch, read_only=True)
                state.close()
        except OpsauditError as exc:
            said = str(exc).replace(str(path), f"the state object of batch {batch}")
            report.add("state", "error", said)
            return
        # The killed runs settled by the lease, in the copy (migrated there if it is older).
        if not settle_reader_runs(ds, path, batch):
            no_state_found(report)
            return
        if batch is None:
            report.add("state", "ok", "no batch committed yet (the lease names the runs)")
        else:
            format_found(report, state.format_version, f"batch {batch}: ")
        _runs(report, path, now)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _runs(report: DoctorReport, path: Any, now: dt.datetime) -> None:
    try:
        state = StateDB(path, read_only=True)
        try:
            runs = state.runs_rows()
        finally:
            state.close()
    except StorageError as exc:
        report.add("runs", "error", str(exc))
        return
    runs_found(report, runs, now)
