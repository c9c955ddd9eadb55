"""The small tables (`projects`, `sync_runs`, the names tables of `core.names.TABLES`) exported from
the state to Parquet after each run (the names tables only when the names changed).

The state database is their source of truth; the Parquet copies exist so that DuckDB, Polars,
pandas and Spark read the whole dataset without opsaudit. Then the views database is refreshed,
when what it names has changed, in a short child process: the sync never loads DuckDB (its
peak memory, PRODUCT.md performance targets).
"""

from __future__ import annotations

import hashlib
import logging
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from exporter.core.layout import PROJECTS_FILE, SYNC_RUNS_FILE, VIEWS_DB, find_sql_dir
from exporter.core.names import TABLE_FILES, to_arrow
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.tables import PROJECTS_SCHEMA, SYNC_RUNS_SCHEMA
from exporter.store.base import LocalDataset, Store

log = logging.getLogger("opsaudit.storage")

# The tables rewritten from the state after a run (`replace_table`), and their files.
SNAPSHOT_FILES = {"projects": PROJECTS_FILE, "sync_runs": SYNC_RUNS_FILE, **TABLE_FILES}


def _table(rows: list[tuple[object, ...]], schema: pa.Schema, micros: set[str]) -> pa.Table:
    columns = list(zip(*rows)) if rows else [() for _ in schema]
    arrays = []
    for f, values in zip(schema, columns):
        if f.name in micros:
            arrays.append(pa.array(values, type=pa.int64()).cast(f.type))
        else:
            arrays.append(pa.array(values, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def export_tables(store: Store) -> bool:
    """Rewrite the projects and sync_runs tables from the state, then refresh the readers.

    Returns whether the readers now name exactly the committed files (only then may the files
    a compaction replaced be deleted).
    """
    micros = {
        "created_at",
        "updated_at",
        "first_seen_at",
        "last_seen_at",
        "deleted_at",
        "last_synced_at",
        "checkpoint_at",
    }
    store.replace_table("projects", _table(store.state.projects_rows(), PROJECTS_SCHEMA, micros))
    runs = _table(store.state.runs_rows(), SYNC_RUNS_SCHEMA, {"started_at", "finished_at"})
    store.replace_table("sync_runs", runs)
    export_names(store)
    return store.refresh_readers()


_NAMES_EXPORTED = "names_exported"  # meta: the names generation the tables were written from


def export_names(store: Store) -> None:
    """Rewrite the names tables when the names changed since they were last written (a run
    whose listings were not read, or read unchanged, rewrites nothing). A run killed before
    this leaves the generations apart: the next run writes them."""
    state = store.state
    generation = state.names_generation()
    if state.get_meta(_NAMES_EXPORTED) == generation:
        return  # (a new dataset writes them once, empty: its views read every file)
    for table in NAMES_TABLES:
        store.replace_table(table.name, to_arrow(table, state.names_rows(table)))
    state.set_meta(_NAMES_EXPORTED, generation)


# The state's meta key holding what the views database was last written from.
_VIEWS_KEY = "views_database_key"


def _views_key(dataset: LocalDataset) -> str:
    """A digest of everything `opsaudit.duckdb` is made of: the committed files it names, which
    small tables exist, the .sql files and the code that resolves them."""
    h = hashlib.sha256()
    root = dataset.root.resolve()
    h.update(str(root).encode())
    for path in dataset.live_files():
        h.update(b"\0f" + path.encode())
    for relative in SNAPSHOT_FILES.values():
        h.update(b"\0t" + relative.encode() + str((root / relative).is_file()).encode())
    sql = find_sql_dir()
    for text in sorted(sql.glob("[0-9][0-9]_*.sql")) if sql else []:
        h.update(b"\0s" + text.name.encode() + text.read_bytes())
    h.update((Path(__file__).resolve().parents[2] / "analytics" / "views.py").read_bytes())
    return h.hexdigest()


def refresh_views_database(dataset: LocalDataset) -> bool:
    """Rewrite `opsaudit.duckdb` unless it already names exactly what the state says is live.

    Runs in a child process unless DuckDB is already loaded here (a notebook, the tests). Never
    raises: the data is committed; a views database left stale is refreshed by the next run.
    Returns whether it names exactly the live files now.
    """
    key = _views_key(dataset)
    if (dataset.root / VIEWS_DB).is_file() and dataset.state.get_meta(_VIEWS_KEY) == key:
        return True
    if "duckdb" in sys.modules:
        # Imported here: only when DuckDB is loaded already (the sync itself never loads it,
        # its peak memory), and the analytics layer is optional for the sync.
        try:
            from exporter.analytics.views import write_views_database
        except ImportError:
            return False
        try:
            written = write_views_database(dataset.root) is not None
        except Exception as exc:
            log.warning("could not refresh opsaudit.duckdb: %s", exc)
            return False
    else:
        outcome = _write_views_in_child(dataset.root)
        if outcome is None:
            return False
        written = outcome
    if not written:
        log.warning("opsaudit.duckdb is open in another program; its views were not refreshed")
        return False
    dataset.state.set_meta(_VIEWS_KEY, key)
    return True


def _write_views_in_child(root: Path) -> bool | None:
    """`write_views_database` in a child process: True written, False held open elsewhere,
    None failed (logged)."""
    package_parent = str(Path(__file__).resolve().parents[3])  # the folder holding exporter/
    env = {k: v for k, v in os.environ.items() if k != "NEON_API_KEY"}  # it needs no key
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_parent, env.get("PYTHONPATH")]))
    try:
        done = subprocess.run(
            [sys.executable, "-m", "exporter.analytics.views", str(root)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("could not refresh opsaudit.duckdb: %s", exc)
        return None
    if done.returncode == 3:
        return False
    if done.returncode != 0:
        reason = (done.stderr.strip().splitlines() or [f"exit code {done.returncode}"])[-1]
        log.warning("could not refresh opsaudit.duckdb: %s", reason)
        return None
    return True


def compact(dataset: Store) -> int:
    """Merge small files (`opsaudit compact`); returns how many files were replaced.

    The views database is refreshed before the replaced files are deleted, so no reader is
    ever pointed at a file that is gone.
    """
    dataset.recover()
    removed = dataset.compact()
    if export_tables(dataset):
        dataset.collect_garbage()
    return removed
