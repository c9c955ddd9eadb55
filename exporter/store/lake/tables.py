"""The datasets as Delta Lake tables, with the sync state stored beside them, exactly once.

Layout under the dataset root (`s3://bucket/prefix`, or a local directory):

    _opsaudit/dataset.json                    marker: format, format_version, dataset_id
    _opsaudit/lease.json                      the writer lease (_lease.py)
    _opsaudit/state/<N:012d>-<token>.sqlite   state snapshot that goes with commit txn N
    operation_versions/_delta_log/...         Delta table, partitioned by created_month
    operation_versions/created_month=YYYY-MM/part-*.parquet
    projects/_delta_log/...                   Delta table, overwritten from the state
    sync_runs/_delta_log/...                  Delta table, overwritten from the state
    branches/, endpoints/, branch_versions/,  Delta tables, overwritten from the state just
    endpoint_versions/, project_versions/     before the commit of a batch whose names changed
                                              (exporter.core.names.TABLES; "Names" below)

Exactly once (`commit()`): the state file of batch N is uploaded first, under a name no other
writer can take (If-None-Match: *, a fresh token), then the rows are appended to
`operation_versions` in one Delta commit that carries `txn(appId=dataset_id, version=N)` and, in
its commitInfo, the name of that state object. The Delta commit is the single commit point:

- killed before the commit: the table's txn version is still N-1; the state N object and any
  data files written are orphans, never read (readers follow the log) and cleaned up later;
- killed after the commit: the table says N and names state N; a restart loads exactly it.

`restore_state()` on any machine: read the table's txn version V for the dataset id, download
the state object of commit V, delete state objects above V (not those of a holder whose lease
expired while it may be alive: its commit may still land, `_may_commit_late`). So the state lives
with the data and a fresh host continues where the last run stopped.

Names (issue 21: written in the same commit as the operations they explain). Delta commits one
table at a time, so the names tables of batch N are overwritten just before the
`operation_versions` commit of N, each overwrite tagged `opsaudit.txn = N` in its commitInfo,
after the state object of N is uploaded. Readers take, per names table, the newest version
tagged <= V, V the txn version of the `operation_versions` snapshot they read (`snapshot(name,
upto=V)`; an untagged version, written before this, counts as any): a kill anywhere between
leaves every reader with the names of batch V exactly, never a half-written set. A version
tagged above V is an orphan of an attempt that did not land, and such an attempt always leaves
its state object behind (uploaded first, kept when its commit fails): the next writer's
`restore_state` sees it and rewrites the names tables from state V, tagged V, before it deletes
that object (`repair`), so a retry of N that writes no names cannot adopt the orphan.

Two writers (a lease lost, a zombie) cannot both commit batch N: Delta's conflict check refuses a
second `txn(dataset_id, N)` committed after the snapshot a writer read ("Concurrent transaction"),
and `commit()` itself refuses N <= the table's txn version unless the landed commit names our own
state object (then it was our commit whose answer we never got: reported `already=True`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import sqlite3
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from exporter.core.errors import (
    ConfigError,
    ExitCode,
    NoDatasetError,
    OpsauditError,
    StorageError,
    UnreadableStateError,
)
from exporter.core.layout import FROM_STATE_FILES
from exporter.store.lake.lease import Ended, Lease, LeaseInfo, LeaseLostError
from exporter.store.lake.location import Location, parse_location
from exporter.store.lake.objects import (
    Objects,
    PreconditionFailed,
    classify,
    objects_for,
    profile_keys,
    scrubbed,
)
from exporter.store.lake.superseded import (
    SUPERSEDED,
    TXN,
    derive,
    record_of,
    uncommitted_files,
)
from exporter.store.state import StateDB

if TYPE_CHECKING:
    import pyarrow.dataset as pads
    from deltalake import DeltaTable

log = logging.getLogger("opsaudit.lake")

MARKER_KEY = "_opsaudit/dataset.json"
STATE_PREFIX = "_opsaudit/state/"
FORMAT = "opsaudit-lake"
FORMAT_VERSION = 1

VERSIONS = "operation_versions"
PROJECTS = "projects"
SYNC_RUNS = "sync_runs"
# The tables overwritten from the state (`replace_table`): projects, sync_runs and the names
# tables (`exporter.core.names.TABLES`: branches, endpoints and their versions, project_versions).
REPLACEABLE = tuple(FROM_STATE_FILES)
# `superseded`: the record of the versions later ones replaced (_superseded.py).
TABLES = (VERSIONS, SUPERSEDED, *REPLACEABLE)
PARTITIONS: dict[str, list[str]] = {VERSIONS: ["created_month"]}

META_STATE = "opsaudit.state"  # commitInfo key: the state object of this commit
META_TXN = "opsaudit.txn"
META_RUN = "opsaudit.run_id"
# commitInfo key: a token of one write attempt, by which a write whose answer was lost is
# recognised as landed (`_landed_write`).
META_WRITE = "opsaudit.write"

# A checkpoint every 10 commits (delta-rs' default is 100): opening the table on a fresh machine
# (every run of a Kubernetes CronJob) reads the last checkpoint and at most 10 commit files.
TABLE_CONFIGURATION = {"delta.checkpointInterval": "10"}

KEEP_STATES = 3  # state objects kept below the current one (debugging, manual rollback)
# After an append that raised, the history is read up to this many times (pauses of 0.5 s, 1 s)
# to learn whether the commit landed.
LANDED_READS = 3
LANDED_PAUSE_S = 0.5
# A write whose answer was lost is among the table's last few commits (one writer: the lease).
LANDED_HISTORY = 4
MIN_VACUUM_RETENTION = timedelta(hours=1)
DEFAULT_VACUUM_RETENTION = timedelta(hours=24)


def _may_commit_late(lease: Lease) -> bool:
    """Whether the lease was taken over by expiry from a holder that may be alive (another
    machine, a process stalled past its ttl): its commit of the next batch may still be in
    flight (a PUT the client retries for minutes) and land after the taker's restore. Deleting
    the state object it names broke the dataset for every later run ("its state object is
    missing")."""
    taken = lease.taken_from
    return taken is not None and not taken.holder_is_dead(lease.machine)


class CommitUnknownError(OpsauditError):
    """A commit failed and whether it landed cannot be told yet (exit 5): nothing was deleted,
    the next run restores whichever batch the table holds."""

    exit_code = ExitCode.FATAL


class DamagedTableError(StorageError):
    """A table's Delta log holds a commit file that is not JSON (exit 6): opsaudit writes each
    commit file whole (an object store's put is), so something else wrote or cut it."""


@dataclass(frozen=True)
class CommitResult:
    txn_version: int  # N
    table_version: int  # the Delta version of operation_versions that carries txn N
    state_key: str
    rows: int
    already: bool = False  # the commit had landed before (we never heard the answer)


def _deltalake() -> Any:
    try:
        import deltalake
    except ImportError:  # pragma: no cover - the lake extra installs it
        raise ConfigError(
            "Delta Lake storage needs the lake extra: pip install 'opsaudit[lake]'"
        ) from None
    return deltalake


def with_created_month(table: pa.Table) -> pa.Table:
    """Add the `created_month` partition column ('YYYY-MM' of created_date) if it is missing."""
    if "created_month" in table.column_names:
        return table
    months = pc.strftime(table["created_date"], format="%Y-%m")
    return table.append_column("created_month", months.cast(pa.string()))


def open_restored_state(path: Path, where: str, batch: int, *, read_only: bool = False) -> StateDB:
    """The state restored from committed batch `batch` (0: none yet, a new state). One that
    cannot be opened is named by its batch: its local copy's path (a temporary file, deleted
    since) means nothing to whoever reads the message. A newer format says so as it is.
    `read_only`: as StateDB's (its `format_version` the object's own: doctor)."""
    try:
        return StateDB(path, read_only=read_only)
    except UnreadableStateError:
        if not batch:
            raise
        raise UnreadableStateError(
            f"{where}: the state object of batch {batch} ({STATE_PREFIX}...) is corrupt or not "
            "an opsaudit state; it was left untouched: restore it from a backup (the bucket's "
            "object versions), or start a new dataset under another prefix"
        ) from None


def settle_runs(
    state: StateDB,
    lease: LeaseInfo | None,
    live: str | None = None,
    unrecorded: Sequence[Ended] = (),
) -> None:
    """Runs left `running` by a killed writer marked `killed` (every one but `live`, the run
    holding the lease now), after adding the run an unreleased `lease` names if the state does
    not know it (killed before its first commit, its row was only in its own local state).
    First, the runs that ended without their record reaching the store (`unrecorded`, which a
    lease names) are recorded as they ended, unless the state has their end."""
    for run in unrecorded:
        state.record_ended(run.run_id, run.started_us, run.finished_us, run.outcome, run.error)
    if lease is not None and not lease.released:
        for run_id, started_us in lease.runs():
            state.add_run(run_id, started_us)
    state.mark_killed_runs(counted=True, live=live)


def state_bytes(path: Path) -> bytes:
    """The bytes to upload for a state file. An SQLite file is copied through the backup API,
    so the copy holds every committed transaction, also those still in its `-wal` file (the
    state database runs in WAL mode: its main file alone can lag behind)."""
    with open(path, "rb") as fh:
        header = fh.read(16)
    if header != b"SQLite format 3\x00":
        return path.read_bytes()
    with tempfile.TemporaryDirectory(prefix="opsaudit-state-") as tmp:
        copy = Path(tmp) / "state.sqlite"
        src = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        dst = sqlite3.connect(copy)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")  # one self-contained file
        finally:
            dst.close()
            src.close()
        return copy.read_bytes()


def _state_key(version: int, token: str) -> str:
    return f"{STATE_PREFIX}{version:012d}-{token}.sqlite"


def _state_version(key: str) -> int | None:
    name = key.rsplit("/", 1)[-1]
    head = name.split("-", 1)[0]
    return int(head) if head.isdigit() and name.endswith(".sqlite") else None


class LakeDataset:
    """One dataset root holding the three Delta tables, the state snapshots and the lease."""

    def __init__(self, location: Location, objects: Objects, dataset_id: str):
        self.location = location
        self.objects = objects
        self.dataset_id = dataset_id
        self._tables: dict[str, DeltaTable] = {}
        self._commits = 0
        # The txn version of the snapshot in hand: `DeltaTable.transaction_version()` replays the
        # log since the last checkpoint on every call (delta-rs 1.6), so it is read once and then
        # carried forward by our own commits.
        self._txn: int | None = None
        self._profile: dict[str, str] | None = None

    # -- opening ---------------------------------------------------------------------------

    @classmethod
    def open(cls, location: Location, *, create: bool = False) -> LakeDataset:
        """Open the dataset at `location` (create the marker when `create` and the prefix is
        empty). A prefix that holds anything else than an opsaudit dataset is refused and left
        untouched; missing bucket, refused credentials and unreachable endpoints are one-line
        errors (see `_objects.classify`)."""
        objects = objects_for(location)
        if location.is_local and create:
            try:
                location.path.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot use data directory {location.display}: {exc.strerror}"
                ) from None
        got = objects.get(MARKER_KEY)
        if got is None:
            empty = objects.is_empty()  # also the probe: bucket missing, access denied, unreachable
            if not empty:
                # A writer racing on a new prefix writes the marker first of all: read it again
                # before calling the prefix foreign.
                got = objects.get(MARKER_KEY)
            if not empty and got is None:
                raise StorageError(
                    f"{location.display} holds objects but is not an opsaudit dataset (no "
                    f"{MARKER_KEY}); nothing was written. Point --data-dir at an empty prefix or "
                    "at an existing opsaudit dataset."
                )
            if got is None and not create:
                raise NoDatasetError(
                    f"{location.display}: no opsaudit dataset here (run a sync first)"
                )
        if got is None:
            marker = {
                "format": FORMAT,
                "format_version": FORMAT_VERSION,
                "dataset_id": uuid.uuid4().hex,
                "created_at": datetime.now(timezone.utc).isoformat(),
            }
            # created concurrently: read theirs
            with contextlib.suppress(PreconditionFailed):
                objects.put(MARKER_KEY, json.dumps(marker).encode(), if_none_match=True)
            got = objects.get(MARKER_KEY)
            if got is None:
                raise StorageError(
                    f"{location.display}: the dataset marker vanished after creation"
                )
        data, _meta = got
        try:
            marker = json.loads(data)
            if marker.get("format") != FORMAT:
                raise ValueError
            version = int(marker["format_version"])
            dataset_id = str(marker["dataset_id"])
        except (ValueError, KeyError, TypeError):
            raise StorageError(
                f"{location.display}: {MARKER_KEY} is not an opsaudit marker; nothing was written"
            ) from None
        if version > FORMAT_VERSION:
            raise StorageError(
                f"{location.display} was written by a newer opsaudit (lake format {version}, this "
                f"version reads {FORMAT_VERSION}); upgrade opsaudit"
            )
        return cls(location, objects, dataset_id)

    @property
    def options(self) -> dict[str, str]:
        """Storage options for deltalake (S3: conditional put by ETag, made explicit)."""
        opts = dict(self.location.options)
        if self.location.scheme == "s3":
            for key, value in opts.items():
                if key.lower() in ("conditional_put", "aws_conditional_put") and value != "etag":
                    raise ConfigError(
                        f"--storage-option {key}: opsaudit commits to S3 only with "
                        "conditional writes (etag): without them two writers can overwrite a commit"
                    )
            opts.setdefault("conditional_put", "etag")
            if self._profile is None:
                self._profile = profile_keys()
            opts.update(self._profile)  # profile keys, resolved in memory (never in a repr)
        return opts

    def lease(self, *, ttl: timedelta | None = None, holder: str | None = None) -> Lease:
        kwargs: dict[str, Any] = {"holder": holder, "where": self.location.display}
        if ttl is not None:
            kwargs["ttl"] = ttl
        return Lease(self.objects, **kwargs)

    # -- tables ----------------------------------------------------------------------------

    def table(self, name: str, *, refresh: bool = True) -> DeltaTable | None:
        """The latest snapshot of table `name`, or None if it was never written."""
        dl = _deltalake()
        dt = self._tables.get(name)
        try:
            if dt is None:
                uri = self.location.table_uri(name)
                try:
                    dt = dl.DeltaTable(uri, storage_options=self.options)
                except dl.exceptions.TableNotFoundError:
                    return None
                self._tables[name] = dt
            elif refresh:
                dt.update_incremental()
        except Exception as exc:
            if "Json error" in str(exc):  # delta-rs' parse error of a log file
                raise self._damaged(name, exc) from None
            raise classify(exc, self.location, f"cannot read table {name} in") from None
        return dt

    def _damaged(self, name: str, exc: Exception) -> DamagedTableError:
        """The error of table `name`, whose log delta-rs cannot parse: it names the log file
        at fault (the first commit since the last checkpoint that is not JSON lines, found by
        reading them: on this error path alone) and what to do about it."""
        log_dir = f"{name}/_delta_log/"
        bad = None
        with contextlib.suppress(Exception):  # the file is named when it can be found
            numbered = {
                m.key: int(m.key[len(log_dir) : -5])
                for m in self.objects.list(log_dir)
                if m.key.endswith(".json") and m.key[len(log_dir) : -5].isdigit()
            }
            last = self.objects.get(f"{log_dir}_last_checkpoint")
            since = -1 if last is None else int(json.loads(last[0])["version"])
            for key in sorted(
                (k for k, n in numbered.items() if n > since), key=numbered.__getitem__
            ):
                got = self.objects.get(key)
                try:
                    [json.loads(line) for line in (got[0] if got else b"").splitlines()]
                except ValueError:
                    bad = key
                    break
        said = scrubbed(str(exc).splitlines()[0], self.location)[:200]
        where = f"its log file {bad}" if bad else f"a file of {log_dir}"
        if name in REPLACEABLE:
            # Written from the state alone: nothing is lost with the file. projects and
            # sync_runs are rewritten by every sync, a names table when the names change.
            again = (
                "the next sync writes it again"
                if name in (PROJECTS, SYNC_RUNS)
                else "it reads as of the commit before until the names next change"
            )
            fix = (
                f"move {bad or 'it'} out of {log_dir} (keep it: it shows what wrote it), then "
                f"run `opsaudit sync`; {name} holds nothing the state does not: {again}"
            )
        else:
            fix = (
                f"restore {bad or 'it'} from the bucket's object versions or a backup; opsaudit "
                f"cannot rebuild {name}"
            )
        return DamagedTableError(
            f"{self.location.display}: table {name} cannot be read: {where} is not a Delta "
            f"commit ({said}); opsaudit writes each commit file whole, so something else wrote "
            f"or cut it. Fix: {fix}"
        )

    def committed_version(self) -> int | None:
        """The txn version N of the last batch committed to operation_versions (None: none)."""
        dt = self.table(VERSIONS)
        txn = None if dt is None else dt.transaction_version(self.dataset_id)
        self._txn = txn or 0
        return txn

    def _write(
        self, name: str, data: pa.Table, mode: str, properties: Any, dt: DeltaTable | None
    ) -> DeltaTable:
        """Write against the snapshot `dt` (None: create the table). Delta's conflict check
        covers the commits made since that snapshot, so it must be the one the caller's checks
        were made on."""
        dl = _deltalake()
        target: Any = dt if dt is not None else self.location.table_uri(name)
        kwargs: dict[str, Any] = {
            "mode": mode,
            "commit_properties": properties,
            "writer_properties": dl.WriterProperties(compression="ZSTD"),
        }
        if dt is None:
            kwargs["partition_by"] = PARTITIONS.get(name) or None
            kwargs["storage_options"] = self.options
            kwargs["configuration"] = TABLE_CONFIGURATION
        elif mode == "overwrite":
            kwargs["schema_mode"] = "overwrite"
        dl.write_deltalake(target, data, **kwargs)
        if dt is None:
            dt = self.table(name)
            assert dt is not None
        # else: write_deltalake moved `dt` to the version it committed (no reload needed)
        return dt

    # -- the exactly-once commit -----------------------------------------------------------

    def commit(
        self,
        versions: pa.Table,
        state_file: Path,
        version: int,
        *,
        run_id: str = "",
        lease: Lease | None = None,
        names: Sequence[tuple[str, pa.Table]] = (),
    ) -> CommitResult:
        """Commit batch `version` (= previous txn version + 1): upload `state_file` as the state
        of this batch, overwrite the `names` tables (name, rows) tagged with it, then append
        `versions` (may be empty) to operation_versions with `txn(dataset_id, version)` in one
        Delta commit."""
        dl = _deltalake()
        # No refresh: the snapshot in hand is the one our last commit produced (refreshing costs
        # a re-read of the log since the last checkpoint, in delta-rs 1.6). Another writer's
        # commit since then makes ours conflict in Delta: same txn app id -> LeaseLostError.
        dt = self.table(VERSIONS, refresh=False)
        if self._txn is None:
            self._txn = (dt.transaction_version(self.dataset_id) if dt is not None else None) or 0
        current = self._txn
        if version <= current:
            landed = self._state_of_txn(version)
            raise StorageError(
                f"{self.location.display}: batch {version} is already committed (state "
                f"{landed}); the state in hand is stale: restore it from the dataset"
            )
        if version != current + 1:
            raise StorageError(
                f"{self.location.display}: batch {version} does not follow the committed batch "
                f"{current}; restore the state from the dataset first"
            )
        if lease is not None:
            lease.check()
        token = uuid.uuid4().hex[:16]
        key = _state_key(version, token)
        # The key is this attempt's own (a random token): a 412 is our upload landed, its answer
        # lost (a 500), the client's retry finding it there.
        with contextlib.suppress(PreconditionFailed):
            self.objects.put(key, state_bytes(Path(state_file)), if_none_match=True)
        data = with_created_month(versions)
        try:
            self._record_superseded(data, version, run_id)
        except BaseException:
            self._discard_state(key)  # the versions commit was not made: no commit names it
            raise
        for name, rows in names:
            # Tagged N: readers of batch N-1 skip them; the state object of N, kept if this
            # commit does not land, tells the next writer to rewrite them (`restore_state`).
            if lease is not None:
                lease.check()
            self.replace_table(name, rows, run_id=run_id, txn=version, state_key=key, lease=lease)
        props = dl.CommitProperties(
            app_transactions=[dl.Transaction(self.dataset_id, version)],
            custom_metadata={META_STATE: key, META_TXN: str(version), META_RUN: run_id},
        )
        if lease is not None:
            lease.check()
        try:
            dt = self._write(VERSIONS, data, "append", props, dt)
        except Exception as exc:
            # Did it land anyway (answer lost)? Only our commit names our state object. The state
            # object is deleted only when the history shows the commit absent: deleting the state
            # a landed commit names breaks the dataset for every later run (issue 19).
            self._txn = None
            ours = self._landed_version(version, key, exc)
            if ours is not None:
                self._txn = version
                return CommitResult(version, ours, key, data.num_rows, already=True)
            if not names:  # else kept: it marks the names tables written for N as orphans
                self._discard_state(key)
            if "Concurrent transaction" in str(exc):
                raise LeaseLostError(
                    f"{self.location.display}: another writer committed batch {version} "
                    "concurrently; stopping (its commit stands, ours was not made)"
                ) from None
            raise classify(exc, self.location, f"cannot commit batch {version} to") from None
        self._txn = version
        self._commits += 1
        if self._commits % 20 == 0:
            self._prune_states(version)
        return CommitResult(version, dt.version(), key, data.num_rows)

    # -- the superseded record (_superseded.py) -----------------------------------------------

    def record_superseded(self) -> DeltaTable:
        """The `superseded` table; the first time, create it with the record of every version
        committed so far (the one-time migration of a dataset written before the record; an
        empty table for a new dataset). One Delta commit: killed before it, nothing changed."""
        sup = self.table(SUPERSEDED, refresh=False)
        if sup is not None:
            return sup
        dl = _deltalake()
        versions = self.table(VERSIONS, refresh=False)
        if self._txn is None:
            txn = versions.transaction_version(self.dataset_id) if versions is not None else None
            self._txn = txn or 0
        record = derive(None if versions is None else versions.to_pyarrow_dataset(), self._txn)
        props = dl.CommitProperties(
            custom_metadata={META_TXN: str(self._txn), META_RUN: "migration"}
        )
        try:
            sup = self._write(SUPERSEDED, record, "append", props, None)
        except Exception as exc:
            raise classify(exc, self.location, "cannot record the superseded versions in") from None
        log.info("recorded %d superseded versions of %s", record.num_rows, self.location.display)
        return sup

    def _record_superseded(self, versions: pa.Table, version: int, run_id: str) -> None:
        """Append the record of batch `version` to `superseded`, after deleting any rows of
        that batch or later (a killed attempt's: its versions commit never landed)."""
        dl = _deltalake()
        sup = self.record_superseded()
        record = record_of(versions, version)
        mark = uuid.uuid4().hex
        try:
            sup = self._clear_record_from(sup, version)
            if record.num_rows:
                props = dl.CommitProperties(
                    app_transactions=[dl.Transaction(self.dataset_id, version)],
                    custom_metadata={META_TXN: str(version), META_RUN: run_id, META_WRITE: mark},
                )
                self._write(SUPERSEDED, record, "append", props, sup)
        except Exception as exc:
            self._tables.pop(SUPERSEDED, None)  # reread: the append may have landed
            if record.num_rows and self._landed_write(SUPERSEDED, mark) is not None:
                return  # its answer was lost: the retry met our own commit, not another's
            if "Concurrent transaction" in str(exc):
                raise LeaseLostError(
                    f"{self.location.display}: another writer recorded batch {version} "
                    "concurrently; stopping (nothing of ours was committed)"
                ) from None
            raise classify(exc, self.location, f"cannot commit batch {version} to") from None

    def _clear_record_from(self, sup: DeltaTable, version: int) -> DeltaTable:
        """`superseded` without rows of batch `version` or later (a killed attempt's), as a
        snapshot to append to. A delete whose answer was lost (a 500 after S3 applied its log
        entry) is retried by the client, refused as taken, and delta-rs reports our own delete
        as "a concurrent transaction deleted data this operation read": when a fresh snapshot
        holds no such rows, the delete is done, whoever's it was."""
        if not uncommitted_files(pa.table(sup.get_add_actions(flatten=True)), version):
            return sup
        try:
            sup.delete(f"{TXN} >= {version}")
            return sup
        except Exception:
            fresh = self._record_without(version)
            if fresh is None:
                raise
            return fresh

    def _record_without(self, version: int) -> DeltaTable | None:
        """A fresh snapshot of `superseded` if it holds no rows of batch `version` or later,
        else None (also when it cannot be read)."""
        self._tables.pop(SUPERSEDED, None)
        try:
            fresh = self.table(SUPERSEDED)
            if fresh is None or uncommitted_files(
                pa.table(fresh.get_add_actions(flatten=True)), version
            ):
                return None
        except Exception:
            return None
        return fresh

    def versions_snapshot(self) -> tuple[pads.Dataset | None, pads.Dataset | None, int]:
        """The current `operation_versions` snapshot, the superseded record to read with it
        (None: the dataset has none yet, derive it) and the txn version the reader keeps its
        rows up to. The record's table is looked up before the versions, its rows read after:
        a record created (migrated) after this versions snapshot is not taken for complete."""
        recorded = self.table(SUPERSEDED) is not None
        dt = self.table(VERSIONS)
        if dt is None:
            return None, None, 0
        try:
            versions = dt.to_pyarrow_dataset()
            txn = int(dt.transaction_version(self.dataset_id) or 0)
        except Exception as exc:
            raise classify(exc, self.location, f"cannot read table {VERSIONS} in") from None
        return versions, self.snapshot(SUPERSEDED) if recorded else None, txn

    def _landed_version(self, version: int, key: str, failure: Exception) -> int | None:
        """After an append that raised: the table version of our commit of batch `version` (the
        one naming state `key`) if the history shows it landed, None if the history shows it
        absent. A history that cannot be read (LANDED_READS attempts) is no answer: raises
        `CommitUnknownError`, and the state object stays (a landed commit names it)."""
        for attempt in range(LANDED_READS):
            if attempt:
                time.sleep(LANDED_PAUSE_S * attempt)
            self._tables.pop(VERSIONS, None)  # the snapshot in hand predates the commit
            try:
                found = self._commit_of_txn(version)
            except Exception as exc:
                log.warning(
                    "batch %d: cannot read the history of %s (attempt %d of %d): %s",
                    version,
                    self.location.display,
                    attempt + 1,
                    LANDED_READS,
                    scrubbed(str(exc), self.location),
                )
                continue
            if found is not None and found[0] == key:
                return found[1]
            return None  # absent, or batch N is another writer's commit (Delta allows one)
        # Scrubbed before the cut: a credential the cut would split is not recognised after it.
        said = scrubbed((str(failure).splitlines() or [type(failure).__name__])[0], self.location)
        raise CommitUnknownError(
            f"{self.location.display}: the commit of batch {version} failed ({said[:200]}) and "
            "the table's history, which tells whether it landed all the same, could not be read; "
            f"its state object {key} is kept. Nothing is lost: the next run continues from "
            "whichever batch the table holds"
        )

    def _landed_write(self, name: str, mark: str) -> int | None:
        """After a write to table `name` that raised: the table version of the commit carrying
        `mark` (META_WRITE) if it landed all the same, else None (also when the history cannot
        be read). A log entry whose answer was lost (a 500 after S3 applied it) is retried by
        the client, refused as taken, and delta-rs reports our own commit as a concurrent one:
        "a concurrent transaction deleted data this operation read" (an overwrite), or
        "Concurrent transaction" (an append with our txn)."""
        self._tables.pop(name, None)
        try:
            dt = self.table(name)
            history = [] if dt is None else dt.history(LANDED_HISTORY)
        except Exception:
            return None
        found = [int(e["version"]) for e in history if e.get(META_WRITE) == mark]
        return found[0] if found else None

    def _discard_state(self, key: str) -> None:
        try:
            self.objects.delete(key)
        except Exception:
            log.warning("could not delete orphan state %s (removed on the next start)", key)

    def _state_of_txn(self, version: int) -> str | None:
        """The state object named by the commit that carries txn `version` (history scan)."""
        found = self._commit_of_txn(version)
        return None if found is None else found[0]

    def _commit_of_txn(self, version: int) -> tuple[str, int] | None:
        """(state object, table version) of the commit that carries txn `version`, None if the
        history has no such commit; raises if the history cannot be read."""
        dt = self.table(VERSIONS)
        if dt is None:
            return None
        limit = 8
        while True:
            try:
                history = dt.history(limit)
            except Exception as exc:
                raise classify(exc, self.location, "cannot read the history of") from None
            for entry in history:
                if entry.get(META_TXN) == str(version):
                    return str(entry.get(META_STATE)), int(entry["version"])
            if len(history) < limit:
                return None
            limit *= 8

    def restore_state(
        self,
        target: Path,
        *,
        lease: Lease | None = None,
        repair: Callable[[int], None] | None = None,
    ) -> int | None:
        """Download the state of the last committed batch to `target` (replacing it and any
        `-wal`/`-shm` beside it); returns its txn version N (None for a dataset with no commit
        yet, `target` then untouched).

        With `lease` (held: the writer at its start), state objects of batches whose commit
        never landed are deleted and old ones pruned. Without it (status, check, query) nothing
        is deleted: a running writer's next state object must not vanish under it. `repair(V)`
        (with `lease`) is called first when any such object is found: an attempt that did not
        land may have left names tables tagged above V ("Names" above); it rewrites them."""
        if lease is not None:
            lease.check()
        committed = self.committed_version()
        states = [m for m in self.objects.list(STATE_PREFIX) if _state_version(m.key) is not None]
        key = None
        if committed is not None:
            same = [m.key for m in states if _state_version(m.key) == committed]
            key = same[0] if len(same) == 1 else self._state_of_txn(committed)
            if key is None or not any(m.key == key for m in states):
                raise StorageError(
                    f"{self.location.display}: batch {committed} is committed but its state object "
                    f"({key or 'unknown'}) is missing; the dataset was modified outside opsaudit"
                )
            got = self.objects.get(key)
            if got is None:
                raise StorageError(f"{self.location.display}: state object {key} vanished")
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.restore")
            tmp.write_bytes(got[0])
            for suffix in ("-wal", "-shm", "-journal"):  # never replay an old WAL onto it
                target.with_name(target.name + suffix).unlink(missing_ok=True)
            tmp.replace(target)
        if lease is None:
            return committed
        uncommitted = [
            m.key
            for m in states
            if m.key != key and (committed is None or (_state_version(m.key) or 0) >= committed)
        ]
        if uncommitted and repair is not None:
            repair(committed or 0)  # before the objects that mark the orphans are gone
        late = _may_commit_late(lease)
        for orphan in uncommitted:
            if late and (_state_version(orphan) or 0) > (committed or 0):
                continue  # kept: once a commit of its batch lands, the next writer decides
            self._discard_state(orphan)  # its commit never landed
        if committed is not None:
            self._prune_states(committed, states)
        return committed

    def _prune_states(self, committed: int, states: list[Any] | None = None) -> None:
        listed = states if states is not None else self.objects.list(STATE_PREFIX)
        older = sorted(
            {n for m in listed if (n := _state_version(m.key)) is not None and n < committed}
        )
        drop = set(older[:-KEEP_STATES]) if len(older) > KEEP_STATES else set()
        for m in listed:
            if _state_version(m.key) in drop:
                self._discard_state(m.key)

    # -- snapshot tables rebuilt from the state ---------------------------------------------

    def replace_table(
        self,
        name: str,
        data: pa.Table,
        *,
        run_id: str = "",
        txn: int | None = None,
        state_key: str = "",
        lease: Lease | None = None,
    ) -> int:
        """Overwrite a small table (projects, sync_runs, a names table) in one commit; returns
        its version. `txn`: the batch it goes with (a names table, "Names" above); `lease`: the
        writer's, whose loss a conflicting commit may be."""
        if name not in REPLACEABLE:
            raise ValueError(f"{name} is not a replaceable table")
        dl = _deltalake()
        meta = {META_RUN: run_id, META_WRITE: uuid.uuid4().hex}
        if txn is not None:
            meta.update({META_TXN: str(txn), META_STATE: state_key})
        props = dl.CommitProperties(custom_metadata=meta)
        try:
            dt = self._write(name, data, "overwrite", props, self.table(name))
        except Exception as exc:
            landed = self._landed_write(name, meta[META_WRITE])
            if landed is not None:
                return landed
            if lease is None or not isinstance(exc, dl.exceptions.CommitFailedError):
                raise classify(exc, self.location, f"cannot write table {name} in") from None
            conflict = exc
        else:
            return int(dt.version())
        # Another writer committed to the table meanwhile: one that took our lease over ends
        # the run as a lost lease (exit 4, `renew` raises it), not as a storage error (exit 6).
        lease.renew()
        raise classify(conflict, self.location, f"cannot write table {name} in") from None

    # -- reading -----------------------------------------------------------------------------

    def snapshot(self, name: str, *, upto: int | None = None) -> pads.Dataset | None:
        """The current snapshot of table `name` as a pyarrow dataset (files fixed at open), or
        None if the table does not exist yet. DuckDB reads it with `con.register(name, ds)`.
        `upto`: the newest version tagged with a batch <= `upto` (the names tables, read with
        the `operation_versions` snapshot of txn version `upto`; "Names" above)."""
        dt = self.table(name)
        if dt is None:
            return None
        try:
            if upto is not None:
                version = self._version_upto(dt, upto)
                if version is None:
                    return None
                if version != dt.version():
                    uri = self.location.table_uri(name)
                    dt = _deltalake().DeltaTable(uri, version=version, storage_options=self.options)
            return dt.to_pyarrow_dataset()
        except Exception as exc:
            raise classify(exc, self.location, f"cannot read table {name} in") from None

    @staticmethod
    def _version_upto(dt: DeltaTable, upto: int) -> int | None:
        """The newest version of `dt` whose commit is tagged with a batch <= `upto` or not
        tagged at all (None: every version is an orphan of a later batch)."""
        limit = 4
        while True:
            history = dt.history(limit)
            for entry in history:
                tag = entry.get(META_TXN)
                if tag is None or int(tag) <= upto:
                    return int(entry["version"])
            if len(history) < limit:
                return None
            limit *= 4

    def file_uris(self, name: str) -> list[str]:
        dt = self.table(name)
        return [] if dt is None else list(dt.file_uris())

    # -- maintenance -------------------------------------------------------------------------

    def compact(
        self,
        name: str = VERSIONS,
        *,
        target_size: int | None = None,
        partitions: list[str] | None = None,
    ) -> dict[str, Any]:
        """Merge small files (Delta OPTIMIZE compact, one commit, dataChange=false). Readers of
        older snapshots keep their files until vacuum removes them after the retention.
        `partitions`: only these `created_month` values (None: every partition)."""
        dt = self.table(name)
        if dt is None:
            return {}
        filters: Any = None
        if partitions is not None:
            if not partitions:
                return {}
            filters = [("created_month", "in", sorted(partitions))]
        try:
            metrics = dt.optimize.compact(partition_filters=filters, target_size=target_size)
        except Exception as exc:
            raise classify(exc, self.location, f"cannot compact {name} in") from None
        self._tables.pop(name, None)
        return dict(metrics)

    def vacuum(
        self,
        name: str = VERSIONS,
        *,
        retention: timedelta = DEFAULT_VACUUM_RETENTION,
        force: bool = False,
        dry_run: bool = False,
    ) -> list[str]:
        """Delete files no snapshot younger than `retention` needs (removed by compaction or
        overwrite, or orphans of commits that never landed, "full" vacuum). Below one hour is refused unless
        `force`: a reader that opened a snapshot before the compaction may still read them."""
        if retention < MIN_VACUUM_RETENTION and not force:
            raise ConfigError(
                f"vacuum retention {retention} is below {MIN_VACUUM_RETENTION}: running readers may "
                "still need those files (force it only when no reader can be running)"
            )
        dt = self.table(name)
        if dt is None:
            return []
        hours = int(retention.total_seconds() // 3600)
        try:
            # full=True: also files that no commit ever referenced (orphans of a writer killed
            # between its data files and its log entry), once older than the retention.
            return list(
                dt.vacuum(
                    retention_hours=hours,
                    dry_run=dry_run,
                    enforce_retention_duration=False,
                    full=True,
                )
            )
        except Exception as exc:
            raise classify(exc, self.location, f"cannot vacuum {name} in") from None

    def destroy_local(self) -> None:  # pragma: no cover - tests' helper for local roots
        if self.location.is_local:
            shutil.rmtree(self.location.path, ignore_errors=True)


def open_dataset(
    data_dir: str | Path,
    storage_options: Mapping[str, str] | list[str] | None = None,
    *,
    create: bool = False,
) -> LakeDataset:
    """Parse `--data-dir` / `--storage-option` values and open the dataset there."""
    return LakeDataset.open(parse_location(data_dir, storage_options), create=create)
