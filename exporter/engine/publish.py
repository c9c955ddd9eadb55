"""After the commits of a run or a compaction: the small tables, the readers, then garbage.

The order is the guarantee (PRODUCT.md: a reader never sees a row twice or misses one): the files a
compaction replaced are deleted only once every reader names their replacement -- the store's own
readers (`Store.refresh_readers`) and, for a local directory, `opsaudit.duckdb`
(`analytics.views_db`), which the analytics layer owns and the store does not know of.
"""

from __future__ import annotations

from exporter.analytics.views_db import refresh_views_database
from exporter.events.config import discard_backlog
from exporter.store.base import Store
from exporter.store.local.exports import export_tables


def publish(store: Store) -> bool:
    """Export the small tables, point every reader at the committed files, then delete what no
    reader names any more. Returns whether every reader names exactly the committed files."""
    if not export_tables(store):
        return False
    local = store.views_dataset()
    if local is not None and not refresh_views_database(local):
        return False
    store.collect_garbage()
    return True


def compact(store: Store) -> int:
    """Merge small files (`opsaudit compact`); returns how many files were replaced."""
    store.recover()
    removed = store.compact()
    publish(store)
    return removed


def discard_events(store: Store, sink: str) -> tuple[int, int | None]:
    """Drop the events waiting for `sink` (`opsaudit discard-events`), committed as a run's
    state is (on object storage, with the exports); returns how many and the oldest's
    recorded_us."""
    store.recover()
    discarded = discard_backlog(store.state, sink)
    publish(store)
    return discarded


__all__ = ["compact", "discard_events", "publish"]
