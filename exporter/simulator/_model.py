"""Compact storage of one project's operations: parallel arrays, rendered JSON cached per op."""

from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Any

import orjson

from exporter.simulator._names import BranchMeta, EndpointMeta
from exporter.simulator._timefmt import fmt_cursor, fmt_fraction_offset, fmt_seconds

ABSENT = -(2**63)  # an int field the API omits (e.g. total_duration_ms removed by a test)
TERMINAL = frozenset({"finished", "cancelled", "skipped"})  # platform-api.md section 3.1


def _kept(rendered: bytes) -> bytes:
    """A copy of exactly its length, for JSON kept for the simulator's life: orjson's result
    keeps the ~4 KiB buffer it was written into (a 320-byte operation cost 4 KiB: the demo's
    100k operations, simulated in the demo's own process, held ~390 MiB; issue 24)."""
    return bytes(memoryview(rendered))


class Interner:
    """A growing table of strings (actions, statuses): ops store a small index, not the str."""

    def __init__(self, values: list[str]) -> None:
        self.values: list[str] = []
        self.index: dict[str, int] = {}
        for v in values:
            self.get(v)

    def get(self, value: str) -> int:
        i = self.index.get(value)
        if i is None:
            i = len(self.values)
            self.values.append(value)
            self.index[value] = i
        return i


class ProjectData:
    """A project and its operations, oldest first (creation microseconds strictly increase).

    Millions of operations must fit in little memory (issue: ~2M ops under 2 GB), so each field
    lives in a typed array; the JSON of an op is rendered once and cached until it changes.
    """

    def __init__(
        self, index: int, project_id: str, org_id: str, meta: dict[str, Any], shared: bool
    ) -> None:
        self.index = index
        self.id = project_id
        self.org_id = org_id
        self.meta = meta  # the project object as listed (without org_id)
        self.shared = shared
        self.deleted = False
        self.quiet = False  # no live arrivals (a project left alone: `--skip-idle` soaks)
        # `compute_last_active_at` of the listing: moved by every operation but the control
        # plane's periodic check_availability (what `sync --skip-idle` can and cannot see).
        self.active_us: int | None = None
        self._rendered_meta: bytes | None = None
        self.ids: list[str] = []
        self.created = array("q")
        self.updated = array("q")
        self.duration = array("q")
        self.failures = array("q")
        self.action = array("H")
        self.status = array("H")
        self.branch = array("i")  # index into self.branches, -1 absent
        self.endpoint = array("i")  # index into self.endpoints, -1 absent
        self.error: dict[int, str] = {}
        self.retry_at: dict[int, int] = {}
        self.extra: dict[int, dict[str, Any]] = {}  # unknown fields, rendered after known ones
        # created_at rendered with its fraction and this offset (minutes) instead of whole `Z` seconds
        self.created_offset: dict[int, int] = {}
        self.rendered: list[bytes | None] = []
        self.branches: list[str] = []
        self.endpoints: list[str] = []
        self._branch_ix: dict[str, int] = {}
        self._endpoint_ix: dict[str, int] = {}
        self.born_us = 0  # the project's creation (its default branch and compute date from it)
        # What the branches and endpoints listings show, by id in creation order (ids that
        # operations name without an entry here were never listed: deleted before, or made up).
        self.branch_meta: dict[str, BranchMeta] = {}
        self.endpoint_meta: dict[str, EndpointMeta] = {}

    def branch_ix(self, branch_id: str | None) -> int:
        if branch_id is None:
            return -1
        i = self._branch_ix.get(branch_id)
        if i is None:
            i = self._branch_ix[branch_id] = len(self.branches)
            self.branches.append(branch_id)
        return i

    def endpoint_ix(self, endpoint_id: str | None) -> int:
        if endpoint_id is None:
            return -1
        i = self._endpoint_ix.get(endpoint_id)
        if i is None:
            i = self._endpoint_ix[endpoint_id] = len(self.endpoints)
            self.endpoints.append(endpoint_id)
        return i

    @property
    def rendered_meta(self) -> bytes:
        if self._rendered_meta is None:
            meta = {**self.meta, "org_id": self.org_id}
            if self.active_us is not None:
                meta["compute_last_active_at"] = fmt_seconds(self.active_us)
            self._rendered_meta = _kept(orjson.dumps(meta))
        return self._rendered_meta

    def mark_active(self, us: int) -> None:
        if self.active_us is None or us > self.active_us:
            self.active_us = us
            self._rendered_meta = None

    def append(
        self,
        op_id: str,
        created: int,
        updated: int,
        action: int,
        status: int,
        failures: int,
        branch: int,
        endpoint: int,
        duration: int,
    ) -> int:
        """Add the newest operation; returns its index."""
        if self.created and created <= self.created[-1]:
            raise ValueError("operations must be appended in strictly increasing creation time")
        self.ids.append(op_id)
        self.created.append(created)
        self.updated.append(updated)
        self.action.append(action)
        self.status.append(status)
        self.failures.append(failures)
        self.branch.append(branch)
        self.endpoint.append(endpoint)
        self.duration.append(duration)
        self.rendered.append(None)
        return len(self.ids) - 1

    def as_dict(self, i: int, actions: Interner, statuses: Interner) -> dict[str, Any]:
        """Operation i as the API renders it (field order of the public API)."""
        d: dict[str, Any] = {"id": self.ids[i], "project_id": self.id}
        b = self.branch[i]
        if b >= 0:
            d["branch_id"] = self.branches[b]
        e = self.endpoint[i]
        if e >= 0:
            d["endpoint_id"] = self.endpoints[e]
        d["action"] = actions.values[self.action[i]]
        d["status"] = statuses.values[self.status[i]]
        err = self.error.get(i)
        if err is not None:
            d["error"] = err
        if self.failures[i] != ABSENT:
            d["failures_count"] = self.failures[i]
        retry = self.retry_at.get(i)
        if retry is not None:
            d["retry_at"] = fmt_seconds(retry)
        offset = self.created_offset.get(i)
        d["created_at"] = (
            fmt_seconds(self.created[i])
            if offset is None
            else fmt_fraction_offset(self.created[i], offset)
        )
        d["updated_at"] = fmt_seconds(self.updated[i])
        if self.duration[i] != ABSENT:
            d["total_duration_ms"] = self.duration[i]
        extra = self.extra.get(i)
        if extra:
            d.update(extra)
        return d

    def render(self, i: int, actions: Interner, statuses: Interner) -> bytes:
        cached = self.rendered[i]
        if cached is None:
            cached = self.rendered[i] = _kept(orjson.dumps(self.as_dict(i, actions, statuses)))
        return cached

    def page(
        self, limit: int | None, before_us: int | None, actions: Interner, statuses: Interner
    ) -> tuple[list[bytes], int | None]:
        """Newest-first ops created strictly before `before_us` (None: from the newest).

        Returns the rendered ops and the creation microseconds of the page's last (oldest) op.
        """
        hi = len(self.created) if before_us is None else bisect_left(self.created, before_us)
        lo = 0 if limit is None else max(0, hi - limit)
        if hi <= lo:
            return [], None
        chunk = self.rendered[lo:hi]
        if None in chunk:
            for j in range(lo, hi):
                chunk[j - lo] = self.render(j, actions, statuses)
        chunk.reverse()
        return chunk, self.created[lo]  # type: ignore[return-value]

    def cursor_of(self, us: int) -> bytes:
        return fmt_cursor(us).encode()
