"""A Delta dataset on object storage as the views read it (`store.base.Reader`): each table's
current snapshot, a pyarrow dataset registered in the DuckDB connection."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa

from exporter.core.duck import whole_package
from exporter.core.layout import (
    FLAGGED_GLOB,
    PROJECTS_FILE,
    SUMMARY_GLOB,
    SUPERSEDED_GLOB,
    SYNC_RUNS_FILE,
    VERSIONS_GLOB,
)
from exporter.core.model import RunRow
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.tables import SYNC_RUNS_SCHEMA
from exporter.store.base import Source
from exporter.store.lake.superseded import reader_filter
from exporter.store.lake.tables import PROJECTS, SYNC_RUNS, LakeDataset

# The runs as `status` settles them, when the `sync_runs` table lacks some (None: it lacks none).
RunsNow = Callable[[], Sequence[RunRow] | None]


class LakeReader:
    """`store.base.Reader` for an opened `LakeDataset`; `runs`: `store.readers.lake_runs`."""

    def __init__(self, dataset: LakeDataset, label: str, runs: RunsNow | None = None) -> None:
        self.dataset = dataset
        self.label = label
        self.runs = runs

    def sources(self, con: Any, tag: str) -> dict[str, Source]:
        return lake_relations(con, self.dataset, tag, self.runs)

    def readable_paths(self) -> tuple[list[Path], list[Path]]:
        return [], []  # snapshots are read through Arrow, not DuckDB's file system


def lake_relations(
    con: Any, dataset: LakeDataset, tag: str = "", runs: RunsNow | None = None
) -> dict[str, Source]:
    """An object-storage dataset's tables for the .sql files: register each table's current
    snapshot (a pyarrow dataset) in DuckDB connection `con` (under names ending in `tag`) and
    return, per source path the .sql files read, the relation that replaces their
    `read_parquet(...)` ("" for a table not written yet: the loader's empty relation).
    `sync_runs` is the runs `runs()` gives where it gives any: the table is rewritten at the end
    of a run, so it lacks one in progress, killed or refused until the next sync records it."""
    whole_package()  # DuckDB scans the snapshots through the package's Arrow readers
    out: dict[str, Source] = {}
    versions, superseded, txn = dataset.versions_snapshot()
    if versions is not None:
        con.register(f"_opsaudit_operation_versions{tag}", versions)
    out[VERSIONS_GLOB] = (
        "" if versions is None else f"(SELECT * FROM _opsaudit_operation_versions{tag})"
    )
    # The superseded record of the batches that snapshot holds (exporter/store/lake/superseded.py);
    # a dataset without the record (not migrated yet) leaves it to the loader, which derives it.
    out[SUPERSEDED_GLOB] = None
    if superseded is not None:
        con.register(f"_opsaudit_superseded{tag}", superseded)
        out[SUPERSEDED_GLOB] = (
            f"(SELECT id, version FROM _opsaudit_superseded{tag} WHERE {reader_filter(txn)})"
        )
    # No summary or flagged record on object storage yet: the report reads every version.
    out[SUMMARY_GLOB] = None
    out[FLAGGED_GLOB] = None
    # The names tables as of that snapshot's batch: written just before its commit, a newer
    # version belongs to a batch the reader does not see (exporter/store/lake/tables.py, Names).
    for source, name, upto in (
        (PROJECTS_FILE, PROJECTS, None),
        (SYNC_RUNS_FILE, SYNC_RUNS, None),
        *((t.file, t.name, txn) for t in NAMES_TABLES),
    ):
        settled = runs() if runs is not None and name == SYNC_RUNS else None
        snapshot = dataset.snapshot(name, upto=upto) if settled is None else _runs_table(settled)
        if snapshot is None:
            out[source] = ""
            continue
        relation = f"_opsaudit_{name}{tag}"
        con.register(relation, snapshot)
        out[source] = f"(SELECT * FROM {relation})"
    return out


def _runs_table(runs: Sequence[RunRow]) -> pa.Table:
    """`runs` as the `sync_runs` table holds them (times in microseconds in the state)."""
    columns = []
    for field in SYNC_RUNS_SCHEMA:
        values = [getattr(r, field.name) for r in runs]
        if pa.types.is_timestamp(field.type):
            columns.append(pa.array(values, type=pa.int64()).cast(field.type))
        else:
            columns.append(pa.array(values, type=field.type))
    return pa.Table.from_arrays(columns, schema=SYNC_RUNS_SCHEMA)


__all__ = ["LakeReader", "RunsNow", "lake_relations"]
