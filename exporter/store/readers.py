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
import logging
import shutil
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

from exporter.core.errors import ConfigError, NoDatasetError, missing_data_dir
from exporter.core.layout import (
    STATE_FILE,
)
from exporter.core.model import RunRow
from exporter.core.scratch import scratch_dir
from exporter.store.base import Reader
from exporter.store.lake.location import Location, parse_location, storage_option_list
from exporter.store.local.reader import LocalReader

log = logging.getLogger("opsaudit.readers")

LAKE_EXTRA = "pip install 'opsaudit[lake]'"


def is_url(data_dir: str | Path) -> bool:
    """True when `data_dir` names object storage (s3://, gs://, az://); a ConfigError for an
    unsupported scheme or a malformed URL."""
    if isinstance(data_dir, Path):
        return False
    return not parse_location(data_dir).is_local


def location(data_dir: str | Path, storage_options: Iterable[str] = ()) -> Location:
    options = storage_option_list(storage_options)
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
    tmp = scratch_dir("opsaudit-read-").resolve()  # a reader killed with kill -9 too
    try:
        batch = ds.restore_state(tmp / STATE_FILE)
        if not settle_reader_runs(ds, tmp / STATE_FILE, batch):
            raise NoDatasetError(f"no dataset in {loc.display} yet: run `opsaudit sync` first")
        with _LAKES_LOCK:
            _LAKES[tmp] = ds
        yield tmp
    finally:
        with _LAKES_LOCK:
            _LAKES.pop(tmp, None)
        shutil.rmtree(tmp, ignore_errors=True)


# How far a reader's clock may run ahead of the object store's before a live writer's lease
# reads as expired (a killed writer of another machine shows `running` that much longer).
READER_CLOCK_GRACE = timedelta(minutes=10)


def settle_reader_runs(ds: Any, state_file: Path, batch: int | None) -> bool:
    """In the copy of the committed state a reader got: the runs as they are now. A run whose
    lease is free or held by another run was killed (it said `running` until the next sync);
    one killed before its first commit is known only by the lease it left, as is one whose
    upload the store refused. Returns whether there is a state to read: with no batch
    committed, only when the lease names such runs (a first run killed, or refused)."""
    from exporter.store.lake.tables import open_restored_state, settle_runs
    from exporter.store.state import StateDB

    try:
        lease = ds.lease().read()
    except Exception as exc:  # the object store's moment: the runs are shown as committed
        log.info(
            "the lease of %s could not be read (%s): its runs are shown as committed",
            ds.location.display,
            type(exc).__name__,
        )
        return batch is not None
    # A reader cannot ask the store for its clock (its credentials may be read-only: no probe
    # object), so it judges by its own, with READER_CLOCK_GRACE: a reader 300 s ahead saw a
    # live run's lease expired, the run `killed`, and `check` said last_run_failed (exit 8).
    now = datetime.now(timezone.utc)
    grace = READER_CLOCK_GRACE
    if lease is not None and lease.run_id is None and not lease.is_free(now, grace):
        return batch is not None  # a writer that does not name its run: which one is unknown
    if batch is None:
        if lease is None or not ((not lease.released and lease.runs()) or lease.unrecorded):
            return False
        state = StateDB(state_file)  # the runs alone: no batch was committed
    else:
        state = open_restored_state(state_file, ds.location.display, batch)
    try:
        if lease is None:
            settle_runs(state, None)
        else:
            settle_runs(state, lease, lease.live_run(now, grace), unrecorded=lease.unrecorded)
    finally:
        state.close()
    return True


def open_readers(
    data_dirs: Sequence[str | Path], storage_options: Iterable[str] = ()
) -> list[Reader]:
    """For `analytics.views.connect`: each data dir as its storage's `Reader` (a local directory,
    which must exist, or an opened Delta dataset), labelled as given (the `dataset` column when
    several are read together). Storage options apply to every URL among them."""
    if not data_dirs:
        raise ConfigError("no --data-dir given")
    options = storage_option_list(storage_options)
    if options and not any(is_url(d) for d in data_dirs):
        location(data_dirs[0], options)  # the error that says options are for object storage
    readers: list[Reader] = []
    seen: set[str] = set()
    for data_dir in data_dirs:
        loc = parse_location(data_dir, options if is_url(data_dir) else ())
        reader: Reader
        if loc.is_local:
            path = local_path(data_dir, loc)
            if not path.is_dir():
                raise missing_data_dir(data_dir)
            error = _not_a_dataset(path, data_dir)
            if error is not None:
                raise error
            key = str(path.resolve())
            lake = lake_for(path)  # a `reading()` directory standing for object storage
            reader = (
                LocalReader(path, str(data_dir))
                if lake is None
                else _lake_reader(lake, str(data_dir), path / STATE_FILE)
            )
        else:
            require_lake()
            from exporter.store.lake.tables import LakeDataset  # pyarrow: object storage only

            key = loc.identity  # %-escapes decoded: `pct%20x` is the dataset `pct x`
            reader = _lake_reader(LakeDataset.open(loc), loc.display)  # StorageError: no dataset
        if key in seen:
            raise ConfigError(f"--data-dir {data_dir} is given twice")
        seen.add(key)
        readers.append(reader)
    return readers


def _lake_reader(dataset: Any, label: str, settled: Path | None = None) -> Reader:
    from exporter.store.lake.reader import LakeReader  # pyarrow, deltalake: object storage only

    return LakeReader(dataset, label, runs=lambda: lake_runs(dataset, settled))


def lake_runs(ds: Any, settled: Path | None = None) -> list[RunRow] | None:
    """The runs as `status` shows them, for the `sync_runs` view of a Delta dataset: its table
    is rewritten at the end of a run, so until the next sync it lacks a run in progress, one
    killed with kill -9 and one whose upload the store refused (the lease names each). None
    when the lease names none (the table is whole). `settled`: a state `reading()` restored and
    settled (status, check): its runs as they are, with no second download."""
    from exporter.store.state import StateDB

    if settled is None:
        try:
            lease = ds.lease().read()
        except Exception:  # the object store's moment: the runs are shown as committed
            return None
        if lease is None or not (lease.unrecorded or (not lease.released and lease.runs())):
            return None  # the table holds every run
    tmp = None if settled is not None else scratch_dir("opsaudit-read-").resolve()
    try:
        if tmp is not None:
            settled = tmp / STATE_FILE
            if not settle_reader_runs(ds, settled, ds.restore_state(settled)):
                return None
        assert settled is not None
        state = StateDB(settled, read_only=True)
        try:
            return state.runs_rows()
        finally:
            state.close()
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


__all__ = [
    "LAKE_EXTRA",
    "is_url",
    "lake_for",
    "lake_runs",
    "local_path",
    "location",
    "open_readers",
    "reading",
    "require_lake",
    "settle_reader_runs",
]
