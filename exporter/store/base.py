"""The storage seam's interfaces: what the sync writes through (`Store`) and what the views
database is built from (`LocalDataset`), with the compaction policy both stores share.

Implementations: `exporter.store.local.dataset.Dataset` (a local directory of Hive Parquet with its SQLite
state) and `exporter.store.lake.store.LakeStore` (Delta tables on object storage). This module names
neither, so each imports it without importing the other (issue 20: the storage import cycle).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from exporter.store.state import StateDB

if TYPE_CHECKING:
    import pyarrow as pa

# Compaction: merge a partition's small files once there are this many of them (so a partition
# holds at most this many small files plus its big ones). Files of BIG_FILE_ROWS or more are left
# alone, so a busy month is not rewritten again and again; merging streams file by file, so its
# memory is one input file, not the partition. Both numbers are in `opsaudit compact --help`
# and the README.
COMPACT_MIN_FILES = 32
BIG_FILE_ROWS = 500_000


@dataclass(frozen=True)
class Committed:
    """What one commit made durable."""

    rows: int
    files: int
    partitions: frozenset[str]


# `reader(run_id, ids, columns)`: the committed operation_versions rows of run `run_id` whose id is
# one of `ids`, with `columns`, in no particular order.
VersionsReader = Callable[[str, Sequence[str], Sequence[str]], "pa.Table"]


class Store(Protocol):
    """The seam between the sync and where a dataset lives: a local directory of Hive Parquet
    (`exporter.store.local.dataset.Dataset`) or Delta tables on object storage (`exporter.store.lake`). The sync,
    compaction and the exports use only these methods; each store keeps every guarantee of
    PRODUCT.md its own way (local: the state's list of committed files; lake: the Delta log).
    """

    state: StateDB  # the working state (checkpoints, open operations, runs)

    def recover(self) -> None:
        """Under the lock, before a run: finish or drop what a killed run left."""

    def begin_run(self, run_id: str, started_us: int) -> None:
        """Record that run `run_id` started (`running` until it ends or is found killed)."""

    def commit(
        self, table: pa.Table | None, tag: str, run_id: str, apply: Callable[[Any], None]
    ) -> Committed:
        """Make `table` (rows of operation_versions, or None) and the state changes `apply(con)`
        makes inside the state transaction durable together, atomically."""
        ...

    def spill(self, table: pa.Table) -> bool:
        """Write rows ahead of the next commit, which makes them durable with the state changes
        it applies (memory: not the commit's rows, one chunk); False: this store cannot, the
        rows go with `commit`'s `table`."""
        ...

    def versions_reader(self) -> VersionsReader | None:
        """How to read committed rows back (the events outbox builds its events' JSON from them
        at delivery, exporter/events/outbox.py), or None: this store cannot do so cheaply, the
        outbox keeps the JSON itself."""
        ...

    def compact(self, partitions: Iterable[str] | None = None) -> int:
        """Merge small files; readers see one side or the other at every instant."""
        ...

    def replace_table(self, name: str, table: pa.Table) -> None:
        """Replace a small table (`projects`, `sync_runs`) atomically."""

    def refresh_readers(self) -> bool:
        """Point the store's own readers at the current committed files; False if some could
        not be."""
        ...

    def views_dataset(self) -> LocalDataset | None:
        """The local directory whose `opsaudit.duckdb` must name the committed files too
        (`analytics.views_db`), or None when readers need no views database."""
        ...

    def child_handoff(self) -> tuple[int, Path] | None:
        """For a helper process of the run (`events.appender`): the file descriptor of the lock
        held on the dataset, to inherit, and a scratch directory the dataset's recovery empties;
        None when the lock is no descriptor (object storage's lease)."""
        ...

    def collect_garbage(self) -> int:
        """Delete what no reader names any more (only once every reader names the committed files:
        `engine.publish`)."""
        ...

    def close(self) -> None:
        """Release the lock and the state."""


class LocalDataset(Protocol):
    """A local data directory as the views database (`opsaudit.duckdb`) is built from it."""

    root: Path
    state: StateDB

    def live_files(self) -> list[str]:
        """The committed data files, relative to `root` (what readers read)."""
        ...

    def child_handoff(self) -> tuple[int, Path] | None:
        """As `Store.child_handoff`: the lock's descriptor for the views database's child."""
        ...


# What a reader's `sources` gives for one path of `core.layout.SOURCES`: the files to read (a
# local directory; [] when there are none yet), the SQL of a relation registered in the
# connection (object storage; "" when the table was never written), or None for a superseded
# record the dataset does not have (the views derive it from the versions).
Source = list[str] | str | None


class Reader(Protocol):
    """One dataset as the views read it (`analytics.views.connect`): each kind of storage says
    what each table's path reads, so the SQL layer never asks which kind it has."""

    label: str  # the data dir as given: the `dataset` column when several are read together

    def sources(self, con: Any, tag: str) -> dict[str, Source]:
        """Per path of `core.layout.SOURCES`, what it reads; relations are registered in the
        DuckDB connection `con` under names ending in `tag`."""
        ...

    def readable_paths(self) -> tuple[list[Path], list[Path]]:
        """The directories and files a locked-down connection must still be allowed to read
        (object storage: none, its snapshots are read through Arrow)."""
        ...


__all__ = [
    "BIG_FILE_ROWS",
    "COMPACT_MIN_FILES",
    "Committed",
    "LocalDataset",
    "Reader",
    "Source",
    "Store",
    "VersionsReader",
]
