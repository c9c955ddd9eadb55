"""One place decides how a cursor-paged listing advances and where it ends.

Used by the operations walk, the open-operation refresh and the project discovery. The end rule
(PRODUCT.md): a page shorter than `limit` is the last one (the API fills pages up to `limit`); so
is an empty page (with or without `pagination`), a page without a cursor, and one that hands back
the cursor that was sent. A listing that may page below `limit` names the sizes it may page at
(`short_pages`): a page of exactly such a size that carries a cursor is not the last (the projects
listing: a server capping at 100 ended the listing there, the rest never synced and, after a
complete listing, marked deleted). A cursor the listing already handed out
earlier means the server is going round in circles: an error, not an endless loop; so does a
page, not the last, that brings nothing the page before did not hold (the same page served
again under a new cursor: walked for ever, its operations stored again and again).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from exporter.core.errors import ApiError

T = TypeVar("T")

_REMEMBERED_CURSORS = 64  # enough to catch a loop; bounded memory over a long walk


@dataclass(frozen=True)
class Page(Generic[T]):
    """One fetched page: the body's items (whatever the fetcher returns) and where it was."""

    items: T
    count: int
    cursor: str | None  # the cursor this page was fetched with
    next_cursor: str | None  # the cursor of the next page (None: this is the last page)


def is_last_page(
    count: int,
    limit: int,
    next_cursor: str | None,
    sent_cursor: str | None,
    short_pages: Collection[int] = (),
) -> bool:
    """The paging end rule shared by every listing (see the module docstring)."""
    if not count or not next_cursor or next_cursor == sent_cursor:
        return True
    return count < limit and count not in short_pages


class Pager(Generic[T]):
    """Fetches the pages of one listing in order, starting from `cursor`.

    `fetch(cursor)` returns (items, number of items, the body's next cursor or None); `ids(items)`
    the keys of a page's items, to tell a page served again (None: not checked).
    """

    def __init__(
        self,
        fetch: Callable[[str | None], tuple[T, int, str | None]],
        limit: int,
        cursor: str | None = None,
        *,
        what: str = "listing",
        ids: Callable[[T], Iterable[Hashable]] | None = None,
        short_pages: Collection[int] = (),
    ):
        self._fetch = fetch
        self.limit = limit
        self._ids = ids
        self._short_pages = short_pages
        self._previous: set[Hashable] | None = None  # the ids of the page before
        self.cursor = cursor  # the cursor of the next page to fetch
        self.exhausted = False
        self.pages = 0
        self._what = what
        self._seen: list[str] = []

    def next(self) -> Page[T] | None:
        """The next page, or None once the listing is exhausted."""
        if self.exhausted:
            return None
        sent = self.cursor
        items, count, next_cursor = self._fetch(sent)
        self.pages += 1
        if is_last_page(count, self.limit, next_cursor, sent, self._short_pages):
            self.exhausted = True
            return Page(items, count, sent, None) if count else None
        assert next_cursor is not None
        if next_cursor in self._seen:
            raise ApiError(f"{self._what}: the server handed back an earlier cursor (loop)")
        if self._ids is not None:
            # An overlapping page (an inclusive cursor) re-sends a few; one with nothing else is
            # the same page again: none of it is taken.
            ids = set(self._ids(items))
            if ids and self._previous is not None and ids <= self._previous:
                raise ApiError(f"{self._what}: the server served the same page again (loop)")
            self._previous = ids
        self._seen.append(next_cursor)
        del self._seen[:-_REMEMBERED_CURSORS]
        self.cursor = next_cursor
        return Page(items, count, sent, next_cursor)


__all__ = ["Page", "Pager", "is_last_page"]
