"""Where a `--data-dir` lives: `reading()` and `open_readers()` for the readers; the writers'
`open_store()` builds on this in `exporter.store.opener`.

- a plain path or `file:///abs/path`: a local directory of Hive-partitioned Parquet with its
  SQLite state (`store.local.dataset.Dataset`), readable by a bare `read_parquet` glob;
- `s3://bucket/prefix`, `gs://...`, `az://...`: Delta Lake tables with the state stored beside
  them (`exporter.store.lake.LakeStore`; needs `pip install 'opsaudit[lake]'`);
- any other scheme: a `ConfigError` (exit 2), never a local folder named `s3:`.

Importing this module is cheap (no pyarrow, deltalake or DuckDB): the CLI parses `--data-dir`
with it at start-up.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from exporter.core.errors import ConfigError, StorageError, missing_data_dir
from exporter.core.layout import (
    PROJECTS_FILE,
    STATE_FILE,
    SUPERSEDED_GLOB,
    SYNC_RUNS_FILE,
    VERSIONS_GLOB,
)
from exporter.store.lake.location import Location, parse_location

LAKE_EXTRA = "pip install 'opsaudit[lake]'"


def is_url(data_dir: str | Path) -> bool:
    """True when `data_dir` names object storage (s3://, gs://, az://); a ConfigError for an
    unsupported scheme or a malformed URL."""
    if isinstance(data_dir, Path):
        return False
    return not parse_location(data_dir).is_local


def location(data_dir: str | Path, storage_options: Iterable[str] = ()) -> Location:
    options = list(storage_options)
    loc = parse_location(data_dir, options)
    if loc.is_local and options:
        raise ConfigError(
            "--storage-option applies to object storage (s3://, gs://, az://) only; "
            f"--data-dir {data_dir} is a local directory"
        )
    return loc


def local_path(data_dir: str | Path, loc: Location) -> Path:
    # A plain path stays as given (relative paths keep working as before); file:// is resolved.
    if isinstance(data_dir, Path):
        return data_dir
    return loc.path if data_dir.strip().lower().startswith("file:") else Path(data_dir)


def require_lake() -> None:
    try:
        import deltalake  # noqa: F401
        import obstore  # noqa: F401
    except ImportError:
        raise ConfigError(
            f"object storage needs the lake extra: {LAKE_EXTRA} (deltalake, obstore)"
        ) from None


# Readers of an object-storage dataset get a local temporary directory standing in for it (the
# restored state, when asked for); `analytics.views.connect` looks the directory up here to read the Delta
# tables' snapshots instead of Parquet files.
_LAKES: dict[Path, Any] = {}
_LAKES_LOCK = threading.Lock()


def lake_for(data_dir: Path) -> Any:
    """The `LakeDataset` a `reading()` directory stands for, or None for a real local dir."""
    with _LAKES_LOCK:
        return _LAKES.get(Path(data_dir).resolve())


# What a sync leaves in a data directory, any one of which makes it a dataset (an empty directory
# is an empty dataset: the views answer 0 rows).
_DATASET_MARKS = ("state.sqlite", "operation_versions", "projects", "sync_runs", "opsaudit.duckdb")


def _not_a_dataset(path: Path, data_dir: str | Path) -> ConfigError | None:
    """A usage error when local `path` holds files but none a sync writes: `--data-dir ~` or a
    mistyped parent would otherwise answer every query with 0 rows."""
    if lake_for(path) is not None or any((path / mark).exists() for mark in _DATASET_MARKS):
        return None
    entries = path.iterdir()
    try:
        if next(entries, None) is None:
            return None
    finally:
        entries.close()
    return ConfigError(
        f"--data-dir {data_dir} is not an opsaudit dataset (no state.sqlite or "
        "operation_versions/ in it); point --data-dir (or $OPSAUDIT_DATA_DIR) at the directory "
        "`opsaudit sync` writes"
    )


@contextlib.contextmanager
def reading(data_dir: str | Path, storage_options: Iterable[str] = ()) -> Iterator[Path]:
    """A local directory holding `data_dir`'s state, for readers of the state (status, check):
    itself when local (it must exist), else a temporary one holding the state of the last
    committed batch (no lease taken, nothing deleted) whose tables `analytics.views.connect` reads from
    the Delta snapshots."""
    loc = location(data_dir, storage_options)
    if loc.is_local:
        path = local_path(data_dir, loc)
        if not path.is_dir():
            raise missing_data_dir(data_dir)
        yield path
        return
    require_lake()
    from exporter.store.lake.tables import LakeDataset  # pyarrow: object storage only (start-up)

    ds = LakeDataset.open(loc)  # StorageError when no dataset is there
    tmp = Path(tempfile.mkdtemp(prefix="opsaudit-read-")).resolve()
    try:
        if ds.restore_state(tmp / STATE_FILE) is None:
            raise StorageError(f"no dataset in {loc.display} yet: run `opsaudit sync` first")
        with _LAKES_LOCK:
            _LAKES[tmp] = ds
        yield tmp
    finally:
        with _LAKES_LOCK:
            _LAKES.pop(tmp, None)
        shutil.rmtree(tmp, ignore_errors=True)


def open_readers(
    data_dirs: Sequence[str | Path], storage_options: Iterable[str] = ()
) -> tuple[list[Any], list[str]]:
    """For `analytics.views.connect`: each data dir as a local directory (`Path`, which must exist) or an
    opened `LakeDataset`, and its label (the `dataset` column when several are read together).
    Storage options apply to every URL among them."""
    if not data_dirs:
        raise ConfigError("no --data-dir given")
    options = list(storage_options)
    if options and not any(is_url(d) for d in data_dirs):
        location(data_dirs[0], options)  # the error that says options are for object storage
    datasets: list[Any] = []
    labels: list[str] = []
    seen: set[str] = set()
    for data_dir in data_dirs:
        loc = parse_location(data_dir, options if is_url(data_dir) else ())
        dataset: Any
        if loc.is_local:
            path = local_path(data_dir, loc)
            if not path.is_dir():
                raise missing_data_dir(data_dir)
            error = _not_a_dataset(path, data_dir)
            if error is not None:
                raise error
            key, dataset, label = str(path.resolve()), path, str(data_dir)
        else:
            require_lake()
            from exporter.store.lake.tables import LakeDataset  # pyarrow: object storage only

            key, label = loc.display.rstrip("/"), loc.display
            dataset = LakeDataset.open(loc)  # StorageError when no dataset is there
        if key in seen:
            raise ConfigError(f"--data-dir {data_dir} is given twice")
        seen.add(key)
        datasets.append(dataset)
        labels.append(label)
    return datasets, labels


def lake_relations(con: Any, dataset: Any, tag: str = "") -> dict[str, str]:
    """An object-storage dataset's tables for the .sql files: register each table's current
    snapshot (a pyarrow dataset) in DuckDB connection `con` (under names ending in `tag`) and
    return, per source path the .sql files read, the relation that replaces their
    `read_parquet(...)` ("" for a table not written yet: the loader's empty relation)."""
    from exporter.core.names import TABLES as NAMES_TABLES
    from exporter.store.lake.superseded import reader_filter
    from exporter.store.lake.tables import PROJECTS, SYNC_RUNS  # pyarrow (start-up)

    out: dict[str, str] = {}
    versions, superseded, txn = dataset.versions_snapshot()
    if versions is not None:
        con.register(f"_opsaudit_operation_versions{tag}", versions)
    out[VERSIONS_GLOB] = (
        "" if versions is None else f"(SELECT * FROM _opsaudit_operation_versions{tag})"
    )
    # The superseded record of the batches that snapshot holds (exporter/store/lake/superseded.py);
    # a dataset without the record (not migrated yet) leaves it to the loader, which derives it.
    if superseded is not None:
        con.register(f"_opsaudit_superseded{tag}", superseded)
        out[SUPERSEDED_GLOB] = (
            f"(SELECT id, version FROM _opsaudit_superseded{tag} WHERE {reader_filter(txn)})"
        )
    for source, name in (
        (PROJECTS_FILE, PROJECTS),
        (SYNC_RUNS_FILE, SYNC_RUNS),
        *((t.file, t.name) for t in NAMES_TABLES),
    ):
        snapshot = dataset.snapshot(name)
        if snapshot is None:
            out[source] = ""
            continue
        relation = f"_opsaudit_{name}{tag}"
        con.register(relation, snapshot)
        out[source] = f"(SELECT * FROM {relation})"
    return out


__all__ = [
    "LAKE_EXTRA",
    "is_url",
    "lake_for",
    "lake_relations",
    "local_path",
    "location",
    "open_readers",
    "reading",
    "require_lake",
]
