"""The small tables (`projects`, `sync_runs`, the names tables of `core.names.TABLES`) exported from
the state to Parquet after each run (the names tables only when the names changed).

The state database is their source of truth; the Parquet copies exist so that DuckDB, Polars,
pandas and Spark read the whole dataset without opsaudit. The views database of a local
directory is the analytics layer's (`analytics.views_db`), refreshed after these by
`engine.publish`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pyarrow as pa

from exporter.core.layout import FROM_STATE_FILES
from exporter.core.model import ProjectRow, RunRow
from exporter.core.names import EXPORTED_META, to_arrow
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.tables import PROJECTS_SCHEMA, SYNC_RUNS_SCHEMA
from exporter.store.base import Store

log = logging.getLogger("opsaudit.storage")

# The tables rewritten from the state after a run (`replace_table`), and their files.
SNAPSHOT_FILES = FROM_STATE_FILES


def _table(rows: Sequence[ProjectRow | RunRow], schema: pa.Schema, micros: set[str]) -> pa.Table:
    # By name: a record missing a column of the schema fails here, never shifts the others.
    columns = [[getattr(r, f.name) for r in rows] for f in schema]
    arrays = []
    for f, values in zip(schema, columns):
        if f.name in micros:
            arrays.append(pa.array(values, type=pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def export_tables(store: Store) -> bool:
    """Rewrite the projects, sync_runs and names tables from the state, then `refresh_readers`.

    Returns what `refresh_readers` returns (`engine.publish` goes on only then).
    """
    micros = {
        "created_at",
        "updated_at",
        "first_seen_at",
        "last_seen_at",
        "deleted_at",
        "last_synced_at",
        "current_at",
        "checkpoint_at",
    }
    store.replace_table("projects", _table(store.state.projects_rows(), PROJECTS_SCHEMA, micros))
    runs = _table(store.state.runs_rows(), SYNC_RUNS_SCHEMA, {"started_at", "finished_at"})
    store.replace_table("sync_runs", runs)
    export_names(store)
    return store.refresh_readers()


def export_names(store: Store) -> None:
    """Rewrite the names tables when the names changed since they were last written (a run
    whose listings were not read, or read unchanged, rewrites nothing). A run killed before
    this leaves the generations apart: the next run writes them."""
    state = store.state
    generation = state.names_generation()
    if state.get_meta(EXPORTED_META) == generation:
        return  # (a new dataset writes them once, empty: its views read every file)
    for table in NAMES_TABLES:
        store.replace_table(table.name, to_arrow(table, state.names_rows(table)))
    state.set_meta(EXPORTED_META, generation)
