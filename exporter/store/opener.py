"""`open_store()`: a writer's `--data-dir` as its `Store` (the one place that names both kinds).

Apart from `store.readers` (the readers' side, which the SQL layer imports): the local store refreshes
the views database through the SQL layer, so a module that both named the local store and served
the SQL layer would close an import cycle (issue 20).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from exporter.store.readers import local_path, location, require_lake

if TYPE_CHECKING:
    from exporter.store.base import Store


def open_store(
    data_dir: str | Path,
    storage_options: Iterable[str] = (),
    *,
    lock: bool,
    wait: bool,
    stop: threading.Event | None = None,
) -> Store:
    """The store of `data_dir` for a writer (sync, compact), under its lock or lease (`stop`,
    once set, ends a `wait` with `StoppedError`)."""
    loc = location(data_dir, storage_options)
    # Each store is imported when it is opened, so importing this module stays cheap: the local
    # one loads pyarrow, the lake one needs the lake extra (deltalake, obstore).
    if loc.is_local:
        from exporter.store.local.dataset import Dataset

        return Dataset(local_path(data_dir, loc), lock=lock, wait=wait, stop=stop)
    require_lake()
    from exporter.store.lake.store import LakeStore

    return LakeStore(loc, lock=lock, wait=wait, stop=stop)


__all__ = ["open_store"]
