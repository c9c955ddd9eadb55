"""A Delta dataset on object storage as the views read it (`store.base.Reader`): each table's
current snapshot, a pyarrow dataset registered in the DuckDB connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exporter.core.duck import whole_package
from exporter.core.layout import (
    FLAGGED_GLOB,
    PROJECTS_FILE,
    SUMMARY_GLOB,
    SUPERSEDED_GLOB,
    SYNC_RUNS_FILE,
    VERSIONS_GLOB,
)
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.store.base import Source
from exporter.store.lake.superseded import reader_filter
from exporter.store.lake.tables import PROJECTS, SYNC_RUNS, LakeDataset


class LakeReader:
    """`store.base.Reader` for an opened `LakeDataset`."""

    def __init__(self, dataset: LakeDataset, label: str) -> None:
        self.dataset = dataset
        self.label = label

    def sources(self, con: Any, tag: str) -> dict[str, Source]:
        return lake_relations(con, self.dataset, tag)

    def readable_paths(self) -> tuple[list[Path], list[Path]]:
        return [], []  # snapshots are read through Arrow, not DuckDB's file system


def lake_relations(con: Any, dataset: LakeDataset, tag: str = "") -> dict[str, Source]:
    """An object-storage dataset's tables for the .sql files: register each table's current
    snapshot (a pyarrow dataset) in DuckDB connection `con` (under names ending in `tag`) and
    return, per source path the .sql files read, the relation that replaces their
    `read_parquet(...)` ("" for a table not written yet: the loader's empty relation)."""
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
        snapshot = dataset.snapshot(name, upto=upto)
        if snapshot is None:
            out[source] = ""
            continue
        relation = f"_opsaudit_{name}{tag}"
        con.register(relation, snapshot)
        out[source] = f"(SELECT * FROM {relation})"
    return out


__all__ = ["LakeReader", "lake_relations"]
