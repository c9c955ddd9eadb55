"""The small tables (`projects`, `sync_runs`) exported from the state to Parquet after each run.

The state database is their source of truth; the Parquet copies exist so that DuckDB, Polars,
pandas and Spark read the whole dataset without opsaudit. Then the views database is refreshed.
"""

from __future__ import annotations

import logging

import pyarrow as pa

from exporter._storage import (
    PROJECTS_FILE,
    PROJECTS_SCHEMA,
    SYNC_RUNS_FILE,
    SYNC_RUNS_SCHEMA,
    Dataset,
)

log = logging.getLogger("opsaudit.storage")


def _table(rows: list[tuple[object, ...]], schema: pa.Schema, micros: set[str]) -> pa.Table:
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    arrays = []
    for f, values in zip(schema, columns):
        if f.name in micros:
            arrays.append(pa.array(values, type=pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def export_tables(dataset: Dataset) -> None:
    """Rewrite projects.parquet and sync_runs.parquet from the state, then the views file."""
    projects = dataset.state.projects_rows()
    dataset.replace_file(
        PROJECTS_FILE,
        _table(
            projects,
            PROJECTS_SCHEMA,
            {
                "created_at",
                "updated_at",
                "first_seen_at",
                "last_seen_at",
                "deleted_at",
                "last_synced_at",
                "checkpoint_at",
            },
        ),
    )
    runs = dataset.state.runs_rows()
    dataset.replace_file(
        SYNC_RUNS_FILE, _table(runs, SYNC_RUNS_SCHEMA, {"started_at", "finished_at"})
    )
    try:
        from exporter._sql import write_views_database
    except ImportError:  # the analytics layer is optional for the sync itself
        return
    try:
        if write_views_database(dataset.root) is None:
            log.warning("opsaudit.duckdb is open in another program; its views were not refreshed")
    except Exception as exc:
        log.warning("could not refresh opsaudit.duckdb: %s", exc)


def compact(dataset: Dataset) -> int:
    """Merge small files (`opsaudit compact`); returns how many files were replaced.

    The views database is refreshed before the replaced files are deleted, so no reader is
    ever pointed at a file that is gone.
    """
    dataset.recover()
    removed = dataset.compact()
    export_tables(dataset)
    dataset.collect_garbage()
    return removed
