"""`LakeStore`: the `Store` of a dataset on object storage (issue 11), over `LakeDataset`.

The sync runs on a local working copy of the state, restored from the object store when the
store opens (under the writer lease): the state lives with the data, so a fresh machine (a new
Kubernetes pod, another cron host) continues where the last run stopped.

`commit()`: the state changes are applied in the local state transaction, then
`LakeDataset.commit()` uploads that state as the state of batch N and appends the rows in one
Delta commit carrying `txn(dataset_id, N)`. The Delta commit is the single commit point: killed
before it, the next run restores state N-1 and reads the same operations again; killed after it,
it restores state N. Either way the table is exactly that of an uninterrupted run. After a failed
commit the local state may be ahead of the table, so the store refuses to commit anything more
(the run ends; the next one restores the committed state).

The names tables go with the commit whose state changed the names (`_names_due`): written just
before it, tagged with its batch, read by readers only up to the batch they read
(`LakeDataset`, "Names"); after a kill the next writer rewrites them from the committed state
if an attempt that did not land may have left some (`_repair_names`).

Changes the run makes to the state outside `commit()` (the run's record, the projects listing)
are uploaded with the next commit, or by a state-only commit before the snapshot tables are
rewritten (`replace_table`), so `projects` and `sync_runs` never show a state that is not durable.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from exporter.core.errors import ConfigError, StorageError, redact
from exporter.core.layout import STATE_FILE
from exporter.core.model import Outcome
from exporter.core.names import EXPORTED_META, to_arrow
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.scratch import scratch_dir
from exporter.core.tables import VERSIONS_SCHEMA
from exporter.store.base import BIG_FILE_ROWS, COMPACT_MIN_FILES, Committed
from exporter.store.lake.lease import CLOCK_GRACE, DEFAULT_TTL, Ended, Lease, LeaseLostError
from exporter.store.lake.location import Location
from exporter.store.lake.superseded import SUPERSEDED
from exporter.store.lake.tables import (
    DEFAULT_VACUUM_RETENTION,
    PROJECTS,
    SYNC_RUNS,
    TABLES,
    VERSIONS,
    LakeDataset,
    open_restored_state,
    settle_runs,
)
from exporter.store.state import StateDB

log = logging.getLogger("opsaudit.lake")

# The lease's time to live; shorter values (tests, fast CronJobs) make a killed writer's lease
# expire sooner, at the price of more renewals (every ttl/3).
LEASE_TTL_ENV = "OPSAUDIT_LEASE_TTL"
# Vacuum (delete files no snapshot younger than the retention names) at most this often during
# syncs; `opsaudit compact` always vacuums. The retention (24 h) is what protects readers.
VACUUM_EVERY = timedelta(hours=6)
_META_VACUUM = "lake_last_vacuum_s"


# The tag of a commit that uploads the state alone (`flush_state`).
_STATE_ONLY = "state"


def lease_ttl() -> timedelta:
    raw = os.environ.get(LEASE_TTL_ENV)
    if raw is None:
        return DEFAULT_TTL
    if not raw.strip():  # as every variable the command line reads (cli._common)
        raise ConfigError(f"{LEASE_TTL_ENV} is set but empty: give it a value or unset it")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = 0.0
    if seconds < 1:
        raise ConfigError(f"${LEASE_TTL_ENV}={raw!r}: seconds, at least 1")
    return timedelta(seconds=seconds)


def _empty_versions() -> pa.Table:
    return VERSIONS_SCHEMA.empty_table()


class LakeStore:
    """A dataset on object storage: Delta tables, the state beside them, one writer by lease."""

    def __init__(
        self,
        location: Location,
        *,
        lock: bool = True,
        wait: bool = False,
        stop: threading.Event | None = None,
    ):
        self.location = location
        # Read before the location is opened: opening a new one writes its marker, and a bad
        # value is a usage error that must leave the prefix as it was.
        ttl = lease_ttl() if lock else DEFAULT_TTL
        self.ds = LakeDataset.open(location, create=True)
        self.lease: Lease | None = None
        self._tmp = scratch_dir("opsaudit-lake-")
        self._broken: str | None = None
        self._broken_by = ""  # the failed commit's error, as the run's record says it
        self._run_id = ""
        self._vacuum_due = False
        self._closed = False
        try:
            if lock:
                grace = min(CLOCK_GRACE, max(timedelta(seconds=1), ttl / 2))
                self.lease = Lease(self.ds.objects, ttl=ttl, grace=grace, where=location.display)
                self.lease.stop_waiting = stop  # a sync's Ctrl-C or SIGTERM
                self.lease.acquire(wait=wait, timeout=None)
                self.lease.start_heartbeat()
            path = self._tmp / STATE_FILE
            # The names tables as last written by this process (unchanged ones are not rewritten).
            self._names: dict[str, pa.Table] = {}
            self._txn = (
                self.ds.restore_state(path, lease=self.lease, repair=self._repair_names) or 0
            )
            self.state = open_restored_state(path, location.display, self._txn)
            self._restored = self._txn  # this run's commits are the batches after it
            self._uploaded = self._changes()
        except BaseException:
            self._release()
            raise

    # -- helpers -----------------------------------------------------------------------------

    def _changes(self) -> int:
        """Rows changed in the local state since it was opened (SQLite's total_changes)."""
        return self.state.total_changes()

    def _usable(self) -> None:
        if self._broken is not None:
            raise StorageError(
                f"{self.location.display}: an earlier commit of this run failed ({self._broken}); "
                "nothing more is committed (the next run restores the committed state)"
            )

    def _names_due(self, state: StateDB) -> list[tuple[str, pa.Table]]:
        """The names tables to write with the next commit: those whose rows changed, when the
        names changed since they were last written (marked in the state that commit uploads)."""
        generation = state.names_generation()
        if state.get_meta(EXPORTED_META) == generation:
            return []
        due = []
        for table in NAMES_TABLES:
            rows = to_arrow(table, state.names_rows(table))
            last = self._names.get(table.name)
            if last is None or not last.equals(rows):
                due.append((table.name, rows))
        state.set_meta(EXPORTED_META, generation)
        return due

    def _repair_names(self, committed: int) -> None:
        """After an attempt that did not land: the names tables again from the committed state
        (`restore_state` has just put it in place), tagged with its batch."""
        state = StateDB(self._tmp / STATE_FILE)
        try:
            tables = [(t.name, to_arrow(t, state.names_rows(t))) for t in NAMES_TABLES]
        finally:
            state.close()
        for name, rows in tables:
            if self.lease is not None:
                self.lease.check()
            self.ds.replace_table(name, rows, run_id="repair", txn=committed, lease=self.lease)
            self._names[name] = rows
        log.info("names tables of %s rewritten from batch %d", self.location.display, committed)

    # -- the Store protocol ------------------------------------------------------------------

    def recover(self) -> None:
        """The Delta log is the manifest: nothing to roll forward; runs left `running` by a
        killed writer are marked (uploaded with this run's first commit). A dataset written
        before the superseded record gets it now, once (exporter/store/lake/superseded.py)."""
        if self.lease is None:
            settle_runs(self.state, None)
        else:
            settle_runs(self.state, self.lease.taken_from, unrecorded=self.lease.unrecorded)
        self.ds.record_superseded()

    def begin_run(self, run_id: str, started_us: int) -> None:
        """The run's row, and its name in the lease (uploaded at once, unlike the row)."""
        self.state.start_run(run_id, started_us)
        self._run_id = run_id
        if self.lease is not None:
            self.lease.note_run(run_id, started_us)

    def commit(
        self, table: pa.Table | None, tag: str, run_id: str, apply: Callable[[Any], None]
    ) -> Committed:
        self._usable()
        self._run_id = run_id or self._run_id
        with self.state.transaction() as con:
            apply(con)
            if table is not None and table.num_rows:
                # Uploaded with the rows: a killed run's row says what its commits wrote.
                self.state.count_written(con, self._run_id, table.num_rows)
        if (table is None or not table.num_rows) and tag != _STATE_ONLY:
            # State changes without rows (checkpoints of a walk that found nothing new, re-reads
            # of unchanged open operations) wait for the next upload: losing them to a kill only
            # means redoing that work, and a no-change sync then makes one Delta commit, not two.
            return Committed(0, 0, frozenset())
        rows = table if table is not None and table.num_rows else _empty_versions()
        n = self._txn + 1
        with self._upload():
            names = self._names_due(self.state)
            self.ds.commit(
                rows, self.state.path, n, run_id=self._run_id, lease=self.lease, names=names
            )
        self._names.update(names)
        self._txn = n
        if self.lease is not None:
            self.lease.unrecorded = []  # the state just uploaded records them (`recover`)
        self._uploaded = self._changes()
        months: list[str] = []
        if rows.num_rows:
            months = pc.unique(pc.strftime(rows["created_date"], format="%Y-%m")).to_pylist()
        return Committed(
            rows.num_rows, len(months), frozenset(f"created_month={m}" for m in months)
        )

    def spill(self, table: pa.Table) -> bool:
        """A Delta commit writes its rows itself (write_deltalake): they go with `commit`."""
        return False

    def versions_reader(self) -> None:
        """Reading rows back means reading the Delta table from object storage: the outbox
        keeps its events' JSON in the state instead (uploaded with the rows)."""
        return None

    def flush_state(self) -> bool:
        """Upload the local state if it changed since the last commit (a commit with no rows);
        True if a commit was made."""
        if self._changes() == self._uploaded:
            return False
        self.commit(None, _STATE_ONLY, self._run_id, lambda con: None)
        return True

    def compact(self, partitions: Iterable[str] | None = None) -> int:
        """OPTIMIZE the partitions that hold COMPACT_MIN_FILES small files or more (all
        partitions with two or more when `partitions` is None: `opsaudit compact`). Returns
        the number of files replaced; they stay readable until vacuum, after the retention."""
        self._usable()
        explicit = partitions is None
        if explicit:
            self._vacuum_due = True
        wanted = None if partitions is None else {p.split("=", 1)[-1] for p in partitions}
        dt = self.ds.table(VERSIONS)
        if dt is None:
            return 0
        actions = pa.table(dt.get_add_actions(flatten=True))
        counts: dict[str, int] = {}
        for month, nrows in zip(
            actions.column("partition.created_month").to_pylist(),
            actions.column("num_records").to_pylist(),
        ):
            if nrows is not None and nrows < BIG_FILE_ROWS:
                counts[month] = counts.get(month, 0) + 1
        threshold = 2 if explicit else COMPACT_MIN_FILES
        chosen = [
            m for m, c in counts.items() if c >= threshold and (wanted is None or m in wanted)
        ]
        removed = 0
        if chosen:
            metrics = self.ds.compact(VERSIONS, partitions=chosen)
            removed += int(metrics.get("numFilesRemoved", 0))
        # The superseded record: one small file per commit that added later versions.
        record = self.ds.table(SUPERSEDED)
        if record is not None and len(record.file_uris()) >= threshold:
            removed += int(self.ds.compact(SUPERSEDED).get("numFilesRemoved", 0))
        return removed

    def replace_table(self, name: str, table: pa.Table) -> None:
        self._usable()
        self.flush_state()  # the snapshot tables never show a state that is not durable
        with self._upload():  # the state just uploaded may say the run went well
            self.ds.replace_table(name, table, run_id=self._run_id, lease=self.lease)

    @contextlib.contextmanager
    def _upload(self) -> Iterator[None]:
        """An upload of this run: if it raises, nothing more is committed (`_break`), and a
        lease found lost after this run's commits is said as such (`_after_commits`)."""
        try:
            yield
        except BaseException as exc:
            told = self._after_commits(exc)
            self._break(told or exc)  # the run's record says it as well
            if told is not None:
                raise told from None
            raise

    def _after_commits(self, exc: BaseException) -> LeaseLostError | None:
        """What to raise for the lease found lost (`Lease.check`) after this run committed (None:
        `exc` as it is): "stopping before any commit" was false. Those commits landed and stand
        (a taker restores them, or Delta refuses its commit of a batch they made: one txn version
        per batch), and the next run goes on after them."""
        lease = self.lease
        reason = getattr(exc, "reason", None)
        if lease is None or not isinstance(exc, LeaseLostError) or reason is None:
            return None
        if self._txn <= self._restored:
            return None
        now = None
        with contextlib.suppress(Exception):  # who holds it now, if it can be read
            now = lease.read()
        if now is not None and now.token != lease.token and not now.released:
            reason += f"; {now.holder} holds it now"
        first, last = self._restored + 1, self._txn
        landed = (
            f"commit of batch {last} landed: it stands"
            if first == last
            else f"commits of batches {first}-{last} landed: they stand"
        )
        return LeaseLostError(
            f"the writer lease on {self.location.display} was lost ({reason}) after this run's "
            f"{landed}; nothing more is committed, and the next run goes on after batch {last}"
        )

    def _break(self, exc: BaseException) -> None:
        """An upload of this run failed: nothing more is committed, and the lease names the
        run as it ended (`_unrecorded_end`)."""
        self._broken = type(exc).__name__
        self._broken_by = redact(str(exc).split("\n", 1)[0]) or self._broken

    def refresh_readers(self) -> bool:
        """Delta readers read snapshots named by the log: nothing to point anywhere."""
        self._usable()
        self.flush_state()
        return True

    def views_dataset(self) -> None:
        """Readers of a lake open its Delta tables; there is no views database to keep."""
        return None

    def child_handoff(self) -> None:
        """The lease is no descriptor: the events file's appends stay in the run's process."""
        return None

    def collect_garbage(self) -> int:
        """VACUUM (full: also orphans of killed commits) with the safe retention, after
        `opsaudit compact` or at most every VACUUM_EVERY during syncs."""
        if self._broken is not None or self.lease is None:
            return 0
        now = time.time()
        last = self.state.get_meta(_META_VACUUM)
        if not self._vacuum_due and last and now - float(last) < VACUUM_EVERY.total_seconds():
            return 0
        removed = 0
        for name in TABLES:
            try:
                self.lease.check()
            except LeaseLostError as exc:
                told = self._after_commits(exc)
                if told is not None:
                    raise told from None
                raise
            removed += len(self.ds.vacuum(name, retention=DEFAULT_VACUUM_RETENTION))
        self.state.set_meta(_META_VACUUM, str(int(now)))  # uploaded with the next commit
        self._vacuum_due = False
        return removed

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ended = None
        with contextlib.suppress(Exception):
            ended = self._unrecorded_end()
        with contextlib.suppress(Exception):
            self.state.close()
        self._release(ended)

    def _unrecorded_end(self) -> Ended | None:
        """This run as it ended, when a failed upload kept its record from the store: the
        lease names it for readers and the next run (it was in no state a reader sees)."""
        if self._broken is None or not self._run_id:
            return None
        rows = self.state.query(
            "SELECT started_us, finished_us FROM runs WHERE run_id = ?",
            (self._run_id,),
        )
        if not rows:
            return None
        started_us, finished_us = rows[0]
        # Failed, with the upload's error, whatever the row says: it says how the run went
        # before the upload that failed (`ok`, written just before its last, for one). A
        # Ctrl-C that cut the upload short: interrupted, as a run's Ctrl-C is.
        finished_us = finished_us or int(time.time() * 1e6)
        if self._broken == KeyboardInterrupt.__name__:
            return Ended(self._run_id, started_us, finished_us, Outcome.INTERRUPTED, "interrupted")
        return Ended(self._run_id, started_us, finished_us, Outcome.FAILED, self._broken_by)

    def _release(self, ended: Ended | None = None) -> None:
        if self.lease is not None:
            try:
                self.lease.release(ended)
            except Exception as exc:  # it expires by itself
                log.warning("could not release the lease of %s: %s", self.location.display, exc)
        shutil.rmtree(self._tmp, ignore_errors=True)


__all__ = ["LEASE_TTL_ENV", "PROJECTS", "SYNC_RUNS", "LakeStore", "lease_ttl"]
