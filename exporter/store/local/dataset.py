"""Storage: the Parquet layout, the staged commit, recovery, compaction and the table exports.

Layout (DESIGN.md): `operation_versions/created_month=YYYY-MM/part-*.parquet`, partitioned by
the UTC month of `created_at`, with the UTC date stored in each row as `created_date`. Monthly, not
daily: a backfill commits batches of many projects whose rows spread over months of history, and
daily partitions turned each batch into hundreds of tiny files (a few ms of CPU each, then a
compaction rewrite); by month a batch is a handful of files. Cron every 5 minutes adds one file
to the current month; compaction merges small files only (below BIG_FILE_ROWS), so it never
rewrites more than that many rows however large a month of a 10k-project account grows.

Commit protocol: a file is written to `_staging/` and fsynced (file and directory); the state
transaction registers it as `pending` together with the checkpoints it backs; then it is renamed
into place (both directories fsynced) and marked `live`. Readers (`query`, `report`, the views
database, notebooks through `exporter.connect`) read the list of `live` files from the state,
never a directory glob: a file that is not in that list (a killed run's leftover, a stray copy, a
compaction's inputs) is never read, and a compaction swaps its inputs for its output in one state
transaction, so readers see exactly-once data at every instant. The same protocol works where no
rename exists (object storage: write the final object, then commit the list). `recover()` rolls
pending files forward and deletes unregistered staged files; files a compaction replaced are
deleted only after the views database stops naming them (`collect_garbage`).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from exporter.core.errors import StorageError, os_storage_error
from exporter.core.layout import (
    FLAGGED_DIR,
    FLAGGED_META,
    FLAGGED_PARTITION,
    LOCK_FILE,
    PROJECTS_FILE,
    STAGING_DIR,
    STATE_FILE,
    SUMMARY_DIR,
    SUMMARY_META,
    SUMMARY_PARTITION,
    SUPERSEDED_DIR,
    SUPERSEDED_META,
    SUPERSEDED_PARTITION,
    SYNC_RUNS_FILE,
    VERSIONS_DIR,
    fsync_dir,
    replace_durably,
    stateless_data,
)
from exporter.core.names import EXPORTED_META
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.tables import (
    FLAGGED_SCHEMA,
    PROJECTS_SCHEMA,
    SUMMARY_SCHEMA,
    SUPERSEDED_SCHEMA,
    SYNC_RUNS_SCHEMA,
    VERSIONS_SCHEMA,
)
from exporter.store.base import BIG_FILE_ROWS, COMPACT_MIN_FILES, Committed, LocalDataset, Store
from exporter.store.local.exports import SNAPSHOT_FILES
from exporter.store.local.reader import unreadable
from exporter.store.local.rows import run_rows
from exporter.store.local.spill import (
    Spill,
    by_month,
    flagged_of,
    flagged_record,
    superseded_of,
    superseded_record,
)
from exporter.store.local.summary import (
    SUMMARY_COLUMNS,
    merged_summary,
    summary_by_month,
    summary_of_files,
)
from exporter.store.state import DataDirLock, StateDB

log = logging.getLogger("opsaudit.storage")


# The records written beside the versions (their files are not versions rows).
_RECORDS = (SUPERSEDED_PARTITION, SUMMARY_PARTITION, FLAGGED_PARTITION)
# A month's summary files are merged (whatever their size) once it has this many: a reader sums
# rows of the same key, so unmerged files cost it rows, not correctness.
SUMMARY_MERGE_FILES = 8
# ... reading this many rows at a time into the merged rows of their kind (summary.merged_summary;
# memory: those and the merged; 5M operations: peak RSS 239 -> 163 MiB by action, bench/README.md
# row 3, then ~30 MiB less in each kind's own columns).
_SUMMARY_MERGE_ROWS = 65_536
# Rows written ahead are summarised this many at a time: 2,000-row chunks one by one cost
# ~1.1 us a row, 16k rows at once ~0.4 (issue 24).
_SUMMARY_ROWS = 16_384

_DICTIONARY_COLUMNS = [
    "project_id",
    "branch_id",
    "endpoint_id",
    "action",
    "status",
    "error",
    "run_id",
]


@dataclass(frozen=True)
class StagedFile:
    """A Parquet file written to staging, not yet visible to readers."""

    path: str  # final path, relative to the data dir
    staged: str  # staging path, relative to the data dir
    partition: str
    rows: int
    bytes: int


@contextlib.contextmanager
def _writing(what: str) -> Iterator[None]:
    """Turn an OS error while writing the dataset (disk full, read-only, quota) into ours."""
    try:
        yield
    except OSError as exc:
        reason = exc.strerror or str(exc)
        hint = (
            "free some space, then run again (nothing committed was lost)"
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
            else "check the data directory's permissions and mount"
        )
        raise StorageError(f"{what} failed: {reason}; {hint}") from exc


def _summary_partition(month: str) -> str:
    """The `files.partition` of a month's summary files ("summary/created_month=YYYY-MM")."""
    return f"{SUMMARY_PARTITION}/{month}"


def _files_by_month(paths: Sequence[Path]) -> dict[str, list[Path]]:
    """Versions files per created month (each file holds one, its directory's)."""
    months: dict[str, list[Path]] = {}
    for path in paths:
        months.setdefault(path.parent.name, []).append(path)
    return months


def _summaries_by_month(paths: Sequence[Path]) -> Iterator[tuple[str, pa.Table]]:
    """The summary record of versions files written before there was one, a month at a time:
    the migration of a large dataset holds one month's summary, not the whole history's (~1 GB
    at 10M operations)."""
    months = _files_by_month(paths)
    for month in sorted(months):
        yield _summary_partition(month), summary_of_files(months[month])
    if not months:
        yield SUMMARY_PARTITION, summary_of_files([])


def _flagged_by_month(paths: Sequence[Path]) -> Iterator[tuple[str, pa.Table]]:
    """The flagged record of versions files written before there was one, a month at a time
    (a file each: memory is one month's flagged rows)."""
    months = _files_by_month(paths)
    for month in sorted(months):
        yield FLAGGED_PARTITION, flagged_of(months[month])
    if not months:
        yield FLAGGED_PARTITION, flagged_of([])


class Dataset:
    """One data directory: its state database, its lock and its Parquet files (a `Store`,
    `exporter.store.base`)."""

    def __init__(
        self,
        root: Path,
        *,
        lock: bool = True,
        wait: bool = False,
        stop: threading.Event | None = None,
    ):
        """Open the data directory, creating it if needed; with `lock`, take the sync lock
        first, so that two runs never race on a new state file (`stop` ends a `wait`)."""
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            # Every rename in it is made durable by opening it (`fsync_dir`), which needs read
            # permission: in one this user may write but not list (0333) a new state file was
            # renamed in before that failed, and every run wrote the views database anew.
            fsync_dir(self.root)
            (self.root / STAGING_DIR).mkdir(exist_ok=True)
            probe = self.root / STAGING_DIR / f".probe-{uuid.uuid4().hex[:8]}"
            probe.touch()
            probe.unlink()
        except OSError as exc:
            raise os_storage_error(self.root, exc, "cannot write to data directory") from exc
        self._lock = DataDirLock(self.root / LOCK_FILE)
        if lock:
            self._lock.acquire(wait, stop)
        try:
            refused = stateless_data(self.root)
            if refused is not None:
                raise StorageError(refused)
            self.state = StateDB(self.root / STATE_FILE)
            self._superseded_recorded = False
            self._summary_recorded = False
            self._flagged_recorded = False
            self._spill = Spill(self.root, STAGING_DIR, _DICTIONARY_COLUMNS)
            # The rows written ahead whose summary is not written yet (summary columns only).
            self._summary_waiting: list[pa.Table] = []
            self._summary_rows = 0
        except BaseException:
            self._lock.release()
            raise

    def close(self) -> None:
        self._spill.discard()
        self._summary_waiting, self._summary_rows = [], 0
        self.state.close()
        self._lock.release()

    # -- writing ----------------------------------------------------------------------------

    def _write_staged(
        self,
        parts: Iterable[pa.Table | pa.RecordBatch],
        final: str,
        partition: str,
        schema: pa.Schema = VERSIONS_SCHEMA,
    ) -> StagedFile:
        """Write `parts` (streamed, one at a time) as one fsynced Parquet file in staging."""
        staged = f"{STAGING_DIR}/{uuid.uuid4().hex}.parquet"
        target = self.root / staged
        rows = 0
        with _writing(f"writing {final}"), open(target, "wb") as fh:
            # Dictionary-encode only low-cardinality columns: trying it on ids and raw JSON
            # costs CPU and falls back to plain anyway.
            with pq.ParquetWriter(
                fh,
                schema,
                compression="zstd",
                use_dictionary=[c for c in _DICTIONARY_COLUMNS if c in schema.names],
            ) as writer:
                for part in parts:
                    writer.write(part, row_group_size=256_000)
                    rows += part.num_rows
            fh.flush()
            os.fsync(fh.fileno())
        return StagedFile(final, staged, partition, rows, target.stat().st_size)

    def commit(
        self, table: pa.Table | None, tag: str, run_id: str, apply: Callable[[Any], None]
    ) -> Committed:
        """Stage (fsynced), register + apply in one state transaction, then publish.

        The rows' superseded record is staged with them and registered in the same transaction:
        a reader sees version n+1 exactly when it sees version n marked superseded. So is their
        summary (exporter/store/local/summary.py): the report reads what it holds for exactly the
        versions committed. So is their flagged record (the versions not terminal or with an
        error: the report's row-level sections). The rows `spill` wrote ahead are committed with
        them (exporter/store/local/spill.py)."""
        self.record_superseded()
        self.record_summary()
        self.record_flagged()
        with _writing("writing rows to staging"):
            self._spill_summary()
            spilled = self._spill.close(tag)
        staged = [StagedFile(f.final, f.staged, f.partition, f.rows, f.bytes) for f in spilled]
        if table is not None:
            staged += self.stage_versions(table, tag)
            staged += self._stage_record(
                superseded_record(table),
                SUPERSEDED_DIR,
                SUPERSEDED_PARTITION,
                SUPERSEDED_SCHEMA,
                tag,
            )
            staged += self._stage_record(
                flagged_record(table), FLAGGED_DIR, FLAGGED_PARTITION, FLAGGED_SCHEMA, tag
            )
            for partition, summary in summary_by_month(table):
                staged += self._stage_record(
                    summary, SUMMARY_DIR, _summary_partition(partition), SUMMARY_SCHEMA, tag
                )
        if staged:
            self.sync_staging()
        with self.state.transaction() as con:
            self.state.register_pending(con, staged, run_id)
            apply(con)
        self.publish(staged)
        versions = [f for f in staged if not f.partition.startswith(_RECORDS)]
        return Committed(
            sum(f.rows for f in versions), len(staged), frozenset(f.partition for f in staged)
        )

    def sync_staging(self) -> None:
        """Make staged files' names durable before the state commit that registers them."""
        with _writing("syncing the staging directory"):
            fsync_dir(self.root / STAGING_DIR)

    def spill(self, table: pa.Table) -> bool:
        """Write rows (and their two records) ahead of the commit that registers them,
        into open staging files per partition (exporter/store/local/spill.py)."""
        self.record_superseded()
        self.record_summary()
        self.record_flagged()
        with _writing("writing rows to staging"):
            for partition, part in by_month(table):
                self._spill.write(partition, f"{VERSIONS_DIR}/{partition}", VERSIONS_SCHEMA, part)
            # Its summary, once SUMMARY_ROWS wait (a summary costs ~1 ms whatever its rows; a
            # reader sums rows of the same key, and compaction merges them).
            self._summary_waiting.append(table.select(SUMMARY_COLUMNS))
            self._summary_rows += table.num_rows
            if self._summary_rows >= _SUMMARY_ROWS:
                self._spill_summary()
            record = superseded_record(table)
            if record.num_rows:
                self._spill.write(SUPERSEDED_PARTITION, SUPERSEDED_DIR, SUPERSEDED_SCHEMA, record)
            flagged = flagged_record(table)
            if flagged.num_rows:
                self._spill.write(FLAGGED_PARTITION, FLAGGED_DIR, FLAGGED_SCHEMA, flagged)
        self._spill.rows += table.num_rows
        return True

    def _spill_summary(self) -> None:
        """Write the summary of the rows written ahead since the last one."""
        if self._summary_waiting:
            waiting = pa.concat_tables(self._summary_waiting)
            self._summary_waiting, self._summary_rows = [], 0
            for partition, summary in summary_by_month(waiting):
                self._spill.write(
                    _summary_partition(partition), SUMMARY_DIR, SUMMARY_SCHEMA, summary
                )

    def stage_versions(self, table: pa.Table, tag: str) -> list[StagedFile]:
        """Split a versions table by created month and write each part to staging."""
        if table.num_rows == 0:
            return []
        staged = []
        for partition, part_table in by_month(table):
            final = f"{VERSIONS_DIR}/{partition}/part-{tag}-{uuid.uuid4().hex[:8]}.parquet"
            staged.append(self._write_staged([part_table], final, partition))
        self.sync_staging()
        return staged

    def _stage_record(
        self, record: pa.Table, directory: str, partition: str, schema: pa.Schema, tag: str
    ) -> list[StagedFile]:
        """Stage one record of a commit's versions (superseded, flagged, a month's summary) as a
        file of its own, none when it is empty. `commit` syncs the staging directory once for
        all it staged (each record synced it again before)."""
        if record.num_rows == 0:
            return []
        final = f"{directory}/part-{tag}-{uuid.uuid4().hex[:8]}.parquet"
        return [self._write_staged([record], final, partition, schema)]

    def record_superseded(self) -> None:
        """Once per dataset: write the superseded record of every version committed before
        there was one (state format < 7), from the versions' own (id, version) columns, and mark
        the record complete in the same state transaction. Readers derive the set until then,
        so they read the same rows before and after (tests/sync/test_superseded.py)."""
        if not self._superseded_recorded:
            self._record_once(
                SUPERSEDED_META,
                SUPERSEDED_DIR,
                lambda paths: [(SUPERSEDED_PARTITION, superseded_of(paths))],
            )
            self._superseded_recorded = True

    def record_summary(self) -> None:
        """Once per dataset: write the summary record (exporter/store/local/summary.py) of every
        version committed before there was one (state format < 10), and mark it complete in the
        same state transaction. The report reads every version until then, so it reads the
        same before and after (tests/sync/test_summary.py)."""
        if not self._summary_recorded:
            self._record_once(SUMMARY_META, SUMMARY_DIR, _summaries_by_month)
            self._summary_recorded = True

    def record_flagged(self) -> None:
        """Once per dataset: write the flagged record of every version committed before there
        was one (state format < 11), and mark it complete in the same state transaction. The
        report reads every version for those rows until then, so it reads the same before and
        after (tests/sync/test_flagged.py)."""
        if not self._flagged_recorded:
            self._record_once(FLAGGED_META, FLAGGED_DIR, _flagged_by_month)
            self._flagged_recorded = True

    def _record_once(
        self,
        meta: str,
        directory: str,
        build: Callable[[list[Path]], Iterable[tuple[str, pa.Table]]],
    ) -> None:
        """A record of the committed versions files, unless `meta` says it is there: the
        (partition, table) pieces `build` yields, each written as it comes (memory is one
        piece), at least one file even when empty (its glob then matches in every synced
        dataset, so the .sql files run as written from the data directory), all registered in
        one transaction with `meta` set."""
        if self.state.get_meta(meta) == "1":
            return
        versions = [
            self.root / p for p in self.state.live_files() if p.startswith(f"{VERSIONS_DIR}/")
        ]
        staged: list[StagedFile] = []
        rows = 0
        for partition, record in build(versions):
            if staged and record.num_rows == 0:
                continue
            final = f"{directory}/part-migrated-{uuid.uuid4().hex[:8]}.parquet"
            staged.append(self._write_staged([record], final, partition, record.schema))
            rows += record.num_rows
        self.sync_staging()
        with self.state.transaction() as con:
            self.state.register_pending(con, staged, run_id="migration")
            con.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, '1')", (meta,))
        self.publish(staged)
        log.info("recorded %s of the existing dataset (%d rows)", directory, rows)

    def publish(self, files: Iterable[StagedFile]) -> None:
        """Rename committed files into place and mark them live (idempotent)."""
        files = list(files)
        if not files:
            return
        dirs = {self.root / STAGING_DIR}
        with _writing("publishing committed files"):
            for f in files:
                self._move_into_place(f.staged, f.path)
                dirs.add((self.root / f.path).parent)
            for d in dirs:
                fsync_dir(d)
        self.state.mark_live(f.path for f in files)

    def _move_into_place(self, staged: str | None, final: str) -> None:
        src, dst = self.root / (staged or final), self.root / final
        if src != dst and src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif not dst.exists():
            raise StorageError(
                f"committed file {final} is missing from both staging and its partition; "
                "the data directory was modified outside opsaudit"
            )

    # -- recovery ---------------------------------------------------------------------------

    def begin_run(self, run_id: str, started_us: int) -> None:
        """The run's row (a killed run's process is told gone by the lock file's pid)."""
        self.state.start_run(run_id, started_us)

    def recover(self) -> None:
        """Finish what a killed run committed; drop what it had not (call under the lock)."""
        pending = self.state.files_in("pending")
        with _writing("recovery"):
            for path, staged in pending:
                self._move_into_place(staged, path)
            if pending:
                for d in {(self.root / p).parent for p, _ in pending}:
                    fsync_dir(d)
            for leftover in (self.root / STAGING_DIR).iterdir():
                leftover.unlink()
        if pending:
            self.state.mark_live(p for p, _ in pending)
            log.info("recovery: published %d committed files", len(pending))
        self.state.mark_killed_runs()
        # A names table's file that is not Parquet (something else wrote or cut it) is written
        # again by this run: `export_names` writes them when the names change alone. Readers
        # read the state's names meanwhile (`_names_not_exported`). Five footers: ~1 ms.
        if any(unreadable(self.root / t.file) for t in NAMES_TABLES):
            self.state.set_meta(EXPORTED_META, "")
        self.record_superseded()
        self.record_summary()
        self.record_flagged()

    def collect_garbage(self) -> int:
        """Delete the files a compaction replaced (readers no longer name them)."""
        deleting = [p for p, _ in self.state.files_in("deleting")]
        with _writing("deleting replaced files"):
            for path in deleting:
                (self.root / path).unlink(missing_ok=True)
        if deleting:
            self.state.forget_files(deleting)
        return len(deleting)

    def live_files(self) -> list[str]:
        """The committed data files, relative to the data directory (what readers read)."""
        return self.state.live_files()

    def versions_reader(self) -> Callable[[str, Sequence[str], Sequence[str]], pa.Table]:
        return self.read_versions

    def read_versions(self, run_id: str, ids: Sequence[str], columns: Sequence[str]) -> pa.Table:
        """The committed versions rows of run `run_id` whose id is in `ids` (`columns` only)."""
        files = [self.root / p for p in self.live_files() if p.startswith(f"{VERSIONS_DIR}/")]
        try:
            return run_rows(files, run_id, ids, columns)
        except (OSError, pa.ArrowException) as exc:  # a committed file gone or damaged
            why = f"cannot read the committed rows of waiting events ({exc})"
            raise StorageError(f"{why}: the dataset was changed outside opsaudit") from None

    # -- compaction -------------------------------------------------------------------------

    def compact(self, partitions: Iterable[str] | None = None) -> int:
        """Merge each partition's small files; returns the number of files replaced.

        The replaced files stay on disk, invisible to readers, until `collect_garbage`.
        """
        wanted = set(partitions) if partitions is not None else None
        removed = 0
        for partition, files in self.state.live_files_by_partition().items():
            if wanted is not None and partition not in wanted:
                continue
            if partition.startswith(f"{SUMMARY_PARTITION}/"):
                if len(files) >= SUMMARY_MERGE_FILES:
                    removed += self._compact_files(partition, [path for path, _ in files]) - 1
                continue
            small = [(path, nrows) for path, nrows in files if nrows < BIG_FILE_ROWS]
            if len(small) < COMPACT_MIN_FILES:
                continue
            # Merge into outputs of up to BIG_FILE_ROWS rows each.
            batch: list[str] = []
            batch_rows = 0
            for path, nrows in small:
                if batch and batch_rows + nrows > BIG_FILE_ROWS:
                    if len(batch) > 1:
                        removed += self._compact_files(partition, batch) - 1
                    batch, batch_rows = [], 0
                batch.append(path)
                batch_rows += nrows
            if len(batch) > 1:
                removed += self._compact_files(partition, batch) - 1
        return removed

    def _read_batches(
        self, paths: list[str], schema: pa.Schema = VERSIONS_SCHEMA
    ) -> Iterator[pa.RecordBatch]:
        """The rows of `paths`, a 64k-row batch at a time (compaction's memory is one batch).

        Memory-mapped: read through buffers, the hundreds of small inputs of a backfill's
        compaction left ~50 MiB of fragmented heap behind (peak RSS, PRODUCT.md); mapped pages
        are the page cache's, not the process's heap."""
        for p in paths:
            with pq.ParquetFile(self.root / p, memory_map=True) as source:
                for batch in source.iter_batches(batch_size=65_536, use_threads=False):
                    yield batch.cast(schema)

    def _compact_files(self, partition: str, paths: list[str]) -> int:
        name = f"part-compact-{uuid.uuid4().hex[:12]}.parquet"
        parts: Iterable[pa.Table | pa.RecordBatch]
        if partition == SUPERSEDED_PARTITION:
            final, schema = f"{SUPERSEDED_DIR}/{name}", SUPERSEDED_SCHEMA
            parts = self._read_batches(paths, schema)
        elif partition == FLAGGED_PARTITION:
            final, schema = f"{FLAGGED_DIR}/{name}", FLAGGED_SCHEMA
            parts = self._read_batches(paths, schema)
        elif partition.startswith(SUMMARY_PARTITION):
            # Rows of the same key summed: the record grows with its keys, not its commits.
            final, schema = f"{SUMMARY_DIR}/{name}", SUMMARY_SCHEMA
            parts = merged_summary(self._read_batches(paths, schema), _SUMMARY_MERGE_ROWS)
        else:
            final, schema = f"{VERSIONS_DIR}/{partition}/{name}", VERSIONS_SCHEMA
            parts = self._read_batches(paths, schema)
        staged = self._write_staged(parts, final, partition, schema)
        self.sync_staging()
        state = self.state
        with state.transaction() as con:
            state.register_pending(con, [staged], run_id="compaction", replacing=paths)
        # One state transaction makes the output live and its inputs `deleting`: readers see
        # one or the other, never both. A crash before it is finished by recover().
        self.publish([staged])
        return len(paths)

    # -- small tables -----------------------------------------------------------------------

    def replace_table(self, name: str, table: pa.Table) -> None:
        self.replace_file(SNAPSHOT_FILES[name], table)

    def refresh_readers(self) -> bool:
        """Readers read the state's list of live files: nothing to point anywhere (the views
        database is `views_dataset`'s, refreshed by `engine.publish`)."""
        return True

    def views_dataset(self) -> LocalDataset:
        return self

    def child_handoff(self) -> tuple[int, Path] | None:
        fd = self._lock.fd
        return None if fd is None else (fd, self.root / STAGING_DIR)

    def replace_file(self, relative: str, table: pa.Table) -> None:
        """Atomically replace a single-file table (projects, sync_runs)."""
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        with _writing(f"writing {relative}"):
            replace_durably(target, lambda fh: pq.write_table(table, fh, compression="zstd"))


# Re-exported: these lived here before issue 20 moved them to leaf modules (`core.tables`,
# `store.base`) to break the storage import cycle; tests and benches import them from here.
__all__ = [
    "BIG_FILE_ROWS",
    "COMPACT_MIN_FILES",
    "LOCK_FILE",
    "PROJECTS_FILE",
    "PROJECTS_SCHEMA",
    "SNAPSHOT_FILES",
    "STAGING_DIR",
    "STATE_FILE",
    "SUPERSEDED_SCHEMA",
    "SYNC_RUNS_FILE",
    "SYNC_RUNS_SCHEMA",
    "VERSIONS_DIR",
    "VERSIONS_SCHEMA",
    "Committed",
    "Dataset",
    "StagedFile",
    "Store",
]
