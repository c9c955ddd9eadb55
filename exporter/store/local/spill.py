"""Rows written ahead of the commit that registers them (issue 24: backfill partitions large enough
that the end of a backfill needs no compaction rewrite, within the memory target).

A commit used to write its rows in one go, so a commit had to stay small (10,000 versions: the
rows wait in memory) and a backfill left one small file per month per commit, which the
compaction at its end rewrote whole (1M operations: every row, 83 MB). The local store instead
appends each chunk to an open staging file per partition as the chunk reaches the committer (row
groups of ROW_GROUP_ROWS: memory is BUFFER_ROWS rows at most), and the commit only closes those
files, fsyncs them and registers them with the chunks' state changes, as before
(`Dataset.commit`). So a commit can hold up to BIG_FILE_ROWS versions at about the same memory,
and a month gets one file per commit of that size.

Nothing changes for readers or crash safety: the files stay in `_staging/` under names nobody
reads until the commit's state transaction registers them; a kill before it leaves unregistered
staging files, deleted by the next run's recovery, and the checkpoints they would have backed
were never committed, so that work is redone.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from exporter.core.model import TERMINAL_STATUSES
from exporter.core.tables import FLAGGED_COLUMNS, FLAGGED_SCHEMA, SUPERSEDED_SCHEMA


@dataclass
class _Open:
    directory: str  # where the file goes once committed, relative to the data dir
    staged: str  # its name in staging, relative to the data dir
    fh: BinaryIO
    writer: pq.ParquetWriter
    rows: int = 0
    pending: list[pa.Table] = field(default_factory=list)  # the next row group, not yet written
    pending_rows: int = 0


@dataclass(frozen=True)
class Spilled:
    """A closed, fsynced staging file: the commit registers it under `final`."""

    final: str
    staged: str
    partition: str
    rows: int
    bytes: int


# A partition's rows are written as one row group once this many are waiting (chunks are ~2,000
# rows, split by month: row groups that small cost readers a footer entry each and compress
# worse); all waiting rows of the run are held to at most BUFFER_ROWS (the largest goes first).
ROW_GROUP_ROWS = 8_192
BUFFER_ROWS = 8_192


class Spill:
    """The open staging files of the rows waiting for the next commit, one per partition."""

    def __init__(self, root: Path, staging: str, dictionary_columns: Sequence[str]):
        self.root = root
        self.staging = staging
        self.dictionary_columns = list(dictionary_columns)
        self._open: dict[str, _Open] = {}
        self.rows = 0  # versions rows waiting (the record's rows not counted)
        self._buffered = 0

    def write(self, partition: str, directory: str, schema: pa.Schema, table: pa.Table) -> None:
        """Append `table` to the partition's open file (opened on first use)."""
        f = self._open.get(partition)
        if f is None:
            staged = f"{self.staging}/{uuid.uuid4().hex}.parquet"
            fh = open(self.root / staged, "wb")  # noqa: SIM115 - closed by close()/discard()
            try:
                writer = pq.ParquetWriter(
                    fh,
                    schema,
                    compression="zstd",
                    use_dictionary=[c for c in self.dictionary_columns if c in schema.names],
                )
            except BaseException:
                fh.close()
                raise
            f = self._open[partition] = _Open(directory, staged, fh, writer)
        f.pending.append(table)
        f.pending_rows += table.num_rows
        f.rows += table.num_rows
        self._buffered += table.num_rows
        if f.pending_rows >= ROW_GROUP_ROWS:
            self._flush(f)
        while self._buffered > BUFFER_ROWS:
            self._flush(max(self._open.values(), key=lambda o: o.pending_rows))

    def _flush(self, f: _Open) -> None:
        if f.pending_rows:
            f.writer.write_table(pa.concat_tables(f.pending), row_group_size=256_000)
        self._buffered -= f.pending_rows
        f.pending, f.pending_rows = [], 0

    def close(self, tag: str) -> list[Spilled]:
        """Finish every open file (footer, fsync) and hand them to the commit; empty after."""
        out = []
        try:
            for partition, f in self._open.items():
                self._flush(f)
                f.writer.close()
                f.fh.flush()
                os.fsync(f.fh.fileno())
                f.fh.close()
                final = f"{f.directory}/part-{tag}-{uuid.uuid4().hex[:8]}.parquet"
                size = (self.root / f.staged).stat().st_size
                out.append(Spilled(final, f.staged, partition, f.rows, size))
        except BaseException:
            self.discard()
            raise
        self._open.clear()
        self.rows = self._buffered = 0
        return out

    def discard(self) -> None:
        """Close and delete what was written (a failed run: nothing of it is committed)."""
        for f in self._open.values():
            with contextlib.suppress(Exception):  # the file is deleted anyway (disk full...)
                f.writer.close()
            with contextlib.suppress(OSError):
                f.fh.close()
            (self.root / f.staged).unlink(missing_ok=True)
        self._open.clear()
        self.rows = self._buffered = 0


def by_month(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """(partition, rows) of a versions table per created month."""
    if table.num_rows == 0:
        return
    # Months as year * 100 + month: Arrow's strftime cost ~0.5 µs a row (issue 24).
    dates = table["created_date"]
    months = pc.add(pc.multiply(pc.year(dates), 100), pc.month(dates))
    distinct = sorted(pc.unique(months).to_pylist())
    for month in distinct:
        part = table if len(distinct) == 1 else table.filter(pc.equal(months, month))
        yield f"created_month={month // 100:04d}-{month % 100:02d}", part


def superseded_record(table: pa.Table) -> pa.Table:
    """(id, version - 1) of each row with version > 1 (version n+1 is only ever numbered after
    n was committed, PRODUCT.md)."""
    later = table.filter(pc.greater(table["version"], 1))
    return pa.table(
        [later["id"], pc.subtract(later["version"], pa.scalar(1, pa.int32()))],
        schema=SUPERSEDED_SCHEMA,
    )


# sql/00_base.sql is_terminal (an unknown status, or none, may still change).
_TERMINAL = pa.array(sorted(TERMINAL_STATUSES))


def flagged_record(table: pa.Table) -> pa.Table:
    """The rows of a versions table the report lists or reads apart (`FLAGGED_SCHEMA`): not
    terminal (sql/00_base.sql is_terminal), or with an error text."""
    terminal = pc.fill_null(pc.is_in(table["status"], value_set=_TERMINAL), False)
    erred = pc.fill_null(pc.not_equal(table["error"], ""), False)
    return table.select(FLAGGED_COLUMNS).filter(pc.or_(pc.invert(terminal), erred))


def flagged_of(paths: Sequence[Path]) -> pa.Table:
    """The flagged record of versions files (a dataset written before the record)."""
    parts: list[pa.Table] = []
    for path in paths:
        with pq.ParquetFile(path, memory_map=True) as source:
            rows = source.read(columns=list(FLAGGED_COLUMNS), use_threads=False)
        parts.append(flagged_record(rows.cast(FLAGGED_SCHEMA)))
    return pa.concat_tables(parts) if parts else FLAGGED_SCHEMA.empty_table()


def superseded_of(paths: Sequence[Path]) -> pa.Table:
    """The superseded record of versions files (a dataset written before the record)."""
    parts: list[pa.Table] = []
    for path in paths:
        with pq.ParquetFile(path, memory_map=True) as source:
            ids = source.read(columns=["id", "version"], use_threads=False)
        later = ids.filter(pc.greater(ids["version"], 1))
        if later.num_rows:
            parts.append(later)
    later = pa.concat_tables(parts) if parts else SUPERSEDED_SCHEMA.empty_table()
    return pa.table(
        [later["id"], pc.subtract(later["version"].cast(pa.int32()), 1)],
        schema=SUPERSEDED_SCHEMA,
    )


__all__ = [
    "Spill",
    "Spilled",
    "by_month",
    "flagged_of",
    "flagged_record",
    "superseded_of",
    "superseded_record",
]
