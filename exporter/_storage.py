"""Storage: the Parquet layout, the staged commit, recovery, compaction and the table exports.

Layout (DESIGN.md): `operation_versions/created_month=YYYY-MM/part-*.parquet`, partitioned by
the UTC month of `created_at`, with the UTC date stored in each row as `created_date`. Monthly, not
daily: a backfill commits batches of many projects whose rows spread over months of history, and
daily partitions turned each batch into hundreds of tiny files (a few ms of CPU each, then a
compaction rewrite); by month a batch is a handful of files. Cron every 5 minutes adds one file
to the current month; compaction merges small files only (below BIG_FILE_ROWS), so it never
rewrites more than that many rows however large a month of a 10k-project account grows.

Commit protocol: a file is written to `_staging/` and fsynced; the state transaction registers
it as `pending` together with the checkpoints it backs; then it is renamed into place and marked
`live`. `recover()` rolls pending files forward and deletes unregistered staged files, so the
views never show uncommitted data and a checkpoint never points past data that is not on disk.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from exporter._errors import StorageError
from exporter._state import DataDirLock, StateDB
from exporter._timeutil import UTC_US

log = logging.getLogger("opsaudit.storage")

VERSIONS_DIR = "operation_versions"
PROJECTS_FILE = "projects/projects.parquet"
SYNC_RUNS_FILE = "sync_runs/sync_runs.parquet"
STAGING_DIR = "_staging"
STATE_FILE = "state.sqlite"
LOCK_FILE = ".lock"

# Compaction: merge a partition's small files once there are this many of them (so a partition
# holds at most this many small files plus its big ones). Files of BIG_FILE_ROWS or more are left
# alone, so a busy month is not rewritten again and again; merging streams file by file, so its
# memory is one input file, not the partition.
COMPACT_MIN_FILES = 32
BIG_FILE_ROWS = 500_000

VERSIONS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("project_id", pa.string()),
        ("branch_id", pa.string()),
        ("endpoint_id", pa.string()),
        ("action", pa.string()),
        ("status", pa.string()),
        ("failures_count", pa.int64()),
        ("error", pa.string()),
        ("retry_at", UTC_US),
        ("created_at", UTC_US),
        ("updated_at", UTC_US),
        ("total_duration_ms", pa.int64()),
        ("raw", pa.string()),
        ("version", pa.int32()),
        ("observed_at", UTC_US),
        ("run_id", pa.string()),
        ("created_date", pa.date32()),  # UTC date of created_at (the partition is its month)
    ]
)

PROJECTS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("region_id", pa.string()),
        ("pg_version", pa.int64()),
        ("platform_id", pa.string()),
        ("provisioner", pa.string()),
        ("org_id", pa.string()),
        ("owner_id", pa.string()),
        ("created_at", UTC_US),
        ("updated_at", UTC_US),
        ("raw", pa.string()),
        ("first_seen_at", UTC_US),
        ("last_seen_at", UTC_US),
        ("deleted_at", UTC_US),
        ("last_synced_at", UTC_US),
        ("checkpoint_at", UTC_US),
        ("last_error", pa.string()),
        ("open_operations", pa.int64()),
    ]
)

SYNC_RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started_at", UTC_US),
        ("finished_at", UTC_US),
        ("outcome", pa.string()),
        ("projects_total", pa.int64()),
        ("projects_ok", pa.int64()),
        ("projects_failed", pa.int64()),
        ("requests", pa.int64()),
        ("responses_429", pa.int64()),
        ("retries", pa.int64()),
        ("new_operations", pa.int64()),
        ("changed_operations", pa.int64()),
        ("versions_written", pa.int64()),
        ("error", pa.string()),
    ]
)

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


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Dataset:
    """One data directory: its state database, its lock and its Parquet files."""

    def __init__(self, root: Path, *, lock: bool = True, wait: bool = False):
        """Open the data directory, creating it if needed; with `lock`, take the sync lock
        first, so that two runs never race on a new state file."""
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            (self.root / STAGING_DIR).mkdir(exist_ok=True)
        except OSError as exc:
            raise StorageError(f"cannot use data directory {self.root}: {exc.strerror}") from None
        self._lock = DataDirLock(self.root / LOCK_FILE)
        if lock:
            self._lock.acquire(wait)
        try:
            state_path = self.root / STATE_FILE
            if not state_path.exists() and any((self.root / VERSIONS_DIR).glob("*/*.parquet")):
                raise StorageError(
                    f"{self.root} holds Parquet data but no {STATE_FILE}: syncing into it would "
                    "duplicate history. Restore the state file or use an empty --data-dir."
                )
            self.state = StateDB(state_path)
        except BaseException:
            self._lock.release()
            raise

    def close(self) -> None:
        self.state.close()
        self._lock.release()

    # -- writing ----------------------------------------------------------------------------

    def _write_staged(
        self, parts: Iterable[pa.Table | pa.RecordBatch], final: str, partition: str
    ) -> StagedFile:
        """Write `parts` (streamed, one at a time) as one fsynced Parquet file in staging."""
        staged = f"{STAGING_DIR}/{uuid.uuid4().hex}.parquet"
        target = self.root / staged
        rows = 0
        with open(target, "wb") as fh:
            # Dictionary-encode only low-cardinality columns: trying it on ids and raw JSON
            # costs CPU and falls back to plain anyway.
            with pq.ParquetWriter(
                fh, VERSIONS_SCHEMA, compression="zstd", use_dictionary=_DICTIONARY_COLUMNS
            ) as writer:
                for part in parts:
                    writer.write(part, row_group_size=256_000)
                    rows += part.num_rows
            fh.flush()
            os.fsync(fh.fileno())
        return StagedFile(final, staged, partition, rows, target.stat().st_size)

    def stage_versions(self, table: pa.Table, tag: str) -> list[StagedFile]:
        """Split a versions table by created month and write each part to staging."""
        if table.num_rows == 0:
            return []
        months = pc.strftime(table["created_date"], format="%Y-%m")
        distinct = sorted(pc.unique(months).to_pylist())
        staged = []
        for month in distinct:
            part_table = table if len(distinct) == 1 else table.filter(pc.equal(months, month))
            partition = f"created_month={month}"
            final = f"{VERSIONS_DIR}/{partition}/part-{tag}-{uuid.uuid4().hex[:8]}.parquet"
            staged.append(self._write_staged([part_table], final, partition))
        return staged

    def register_pending(self, con: object, files: Iterable[StagedFile], run_id: str) -> None:
        """Inside the caller's state transaction: record files as committed-but-unpublished."""
        con.executemany(  # type: ignore[attr-defined]
            "INSERT INTO files (path, staged, partition, rows, bytes, state, run_id) "
            "VALUES (?, ?, ?, ?, ?, 'pending', ?)",
            [(f.path, f.staged, f.partition, f.rows, f.bytes, run_id) for f in files],
        )

    def publish(self, files: Iterable[StagedFile]) -> None:
        """Rename committed files into place and mark them live (idempotent)."""
        files = list(files)
        dirs = set()
        for f in files:
            self._move_into_place(f.staged, f.path)
            dirs.add((self.root / f.path).parent)
        for d in dirs:
            _fsync_dir(d)
        with self.state.transaction() as con:
            con.executemany(
                "UPDATE files SET state = 'live', staged = NULL WHERE path = ?",
                [(f.path,) for f in files],
            )

    def _move_into_place(self, staged: str, final: str) -> None:
        src, dst = self.root / staged, self.root / final
        if src.exists():
            dst.parent.mkdir(parents=True, exist_ok=True)
            os.replace(src, dst)
        elif not dst.exists():
            raise StorageError(
                f"committed file {final} is missing from both staging and its partition; "
                "the data directory was modified outside opsaudit"
            )

    # -- recovery ---------------------------------------------------------------------------

    def recover(self) -> None:
        """Finish what a killed run committed; drop what it had not (call under the lock)."""
        pending = self.state.query("SELECT path, staged FROM files WHERE state = 'pending'")
        for path, staged in pending:
            self._move_into_place(staged, path)
        if pending:
            with self.state.transaction() as con:
                con.execute(
                    "UPDATE files SET state = 'live', staged = NULL WHERE state = 'pending'"
                )
            log.info("recovery: published %d committed files", len(pending))
        deleting = self.state.query("SELECT path FROM files WHERE state = 'deleting'")
        for (path,) in deleting:
            (self.root / path).unlink(missing_ok=True)
        if deleting:
            with self.state.transaction() as con:
                con.execute("DELETE FROM files WHERE state = 'deleting'")
        for leftover in (self.root / STAGING_DIR).iterdir():
            leftover.unlink()
        # Runs that a kill interrupted stay visible as such.
        with self.state.transaction() as con:
            con.execute("UPDATE runs SET outcome = 'killed' WHERE outcome = 'running'")

    # -- compaction -------------------------------------------------------------------------

    def compact(self, partitions: Iterable[str] | None = None) -> int:
        """Merge each partition's small files into one; returns the number of files removed."""
        rows = self.state.query(
            "SELECT partition, path, rows FROM files WHERE state = 'live' ORDER BY partition, path"
        )
        by_partition: dict[str, list[tuple[str, int]]] = {}
        for partition, path, nrows in rows:
            by_partition.setdefault(partition, []).append((path, nrows))
        wanted = set(partitions) if partitions is not None else None
        removed = 0
        for partition, files in by_partition.items():
            if wanted is not None and partition not in wanted:
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

    def _read_batches(self, paths: list[str]) -> Iterator[pa.RecordBatch]:
        """The rows of `paths`, a 64k-row batch at a time (compaction's memory is one batch)."""
        for p in paths:
            with pq.ParquetFile(self.root / p) as source:
                for batch in source.iter_batches(batch_size=65_536, use_threads=False):
                    yield batch.cast(VERSIONS_SCHEMA)

    def _compact_files(self, partition: str, paths: list[str]) -> int:
        final = f"{VERSIONS_DIR}/{partition}/part-compact-{uuid.uuid4().hex[:12]}.parquet"
        staged = self._write_staged(self._read_batches(paths), final, partition)
        with self.state.transaction() as con:
            self.register_pending(con, [staged], run_id="compaction")
            con.executemany(
                "UPDATE files SET state = 'deleting' WHERE path = ?", [(p,) for p in paths]
            )
        # Readers may glimpse old and new files together between these two steps (a few
        # microseconds); a crash here is finished by recover().
        self.publish([staged])
        for p in paths:
            (self.root / p).unlink(missing_ok=True)
        with self.state.transaction() as con:
            con.executemany("DELETE FROM files WHERE path = ?", [(p,) for p in paths])
        return len(paths)

    # -- small tables -----------------------------------------------------------------------

    def replace_file(self, relative: str, table: pa.Table) -> None:
        """Atomically replace a single-file table (projects, sync_runs)."""
        target = self.root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}.tmp")
        with open(tmp, "wb") as fh:
            pq.write_table(table, fh, compression="zstd")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, target)
        _fsync_dir(target.parent)


__all__ = [
    "PROJECTS_SCHEMA",
    "SYNC_RUNS_SCHEMA",
    "VERSIONS_SCHEMA",
    "Dataset",
    "StagedFile",
]
