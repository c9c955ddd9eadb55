"""The walk of one project: newest first by cursor down to the tie-safe checkpoint.

Checkpoint (DESIGN.md): `checkpoint_us` is the newest `created_at` that a completed walk saw and
`boundary_ids` the ids it saw at exactly that instant. `created_at` has whole seconds and several
operations often share one (PRODUCT.md), so the walk continues until it has seen an operation
strictly older than the checkpoint; at the checkpoint instant, an id outside `boundary_ids` is
new. Stopping at `<=` would lose late arrivals in the boundary second; `<` would re-add it.

Open operations (seen non-terminal before) are refreshed: free when the walk passes them, else
by walking a little further or by GETting them one by one, whichever costs fewer requests.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from exporter._client import ApiClient, is_last_page
from exporter._errors import ApiError, NotFoundError
from exporter._records import created_micros, encode_raw, fingerprint, is_terminal
from exporter._state import OpenOp, ProjectCheckpoint

log = logging.getLogger("opsaudit.walk")

PAGE_SIZE = 1000  # the API's maximum (PRODUCT.md); always sent: no limit may mean "everything"


@dataclass(frozen=True)
class WalkLimits:
    """Bounds of one project's walk."""

    page_size: int = PAGE_SIZE
    flush_rows: int = 5_000  # hand rows to storage at least this often (flat memory)
    max_extend_pages: int = 20  # pages walked past the checkpoint to refresh open ops
    max_gets: int = 500  # single-operation GETs per project per run; the rest wait a run


@dataclass
class Chunk:
    """Rows and state changes of one project, committed together by storage."""

    project_id: str
    ops: list[dict[str, Any]] = field(default_factory=list)
    raws: list[Any] = field(default_factory=list)  # each op's JSON text
    created_us: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    observed_us: list[int] = field(default_factory=list)
    open_upserts: dict[str, OpenOp] = field(default_factory=dict)
    open_deletes: set[str] = field(default_factory=set)
    # Walk in progress (None: leave as is). resume_cursor None with walk_top set = clear.
    progress: tuple[int | None, frozenset[str], str | None] | None = None
    # Walk completed: the new (checkpoint_us, boundary_ids), and progress is cleared.
    completed: tuple[int | None, frozenset[str]] | None = None
    new: int = 0
    changed: int = 0
    table: pa.Table | None = None  # `ops` as Arrow, built by the worker before queueing

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else len(self.ops)


@dataclass
class WalkResult:
    """What one project's walk did."""

    project_id: str
    pages: int = 0
    gets: int = 0
    new: int = 0
    changed: int = 0
    deleted: bool = False  # the API answered 404 for the project
    open_left: int = 0  # open operations not refreshed this run (bounds reached)


def now_us() -> int:
    return time.time_ns() // 1000


class ProjectWalk:
    """Walks one project and emits `Chunk`s; the caller commits them in order."""

    def __init__(
        self,
        client: ApiClient,
        checkpoint: ProjectCheckpoint,
        emit: Callable[[Chunk], None],
        limits: WalkLimits = WalkLimits(),
        cancel: threading.Event | None = None,
    ):
        self.client = client
        self.cp = checkpoint
        self.pid = checkpoint.project_id
        self.emit = emit
        self.limits = limits
        self.cancel = cancel or threading.Event()
        self.result = WalkResult(self.pid)
        self.open = dict(checkpoint.open_ops)  # current view, updated as chunks are emitted
        self.seen: set[str] = set()  # open ids refreshed this run
        self.chunk = Chunk(self.pid)
        self.density: float | None = None  # microseconds between operations near the walk's end

    # -- classification -------------------------------------------------------------------

    def _record(self, op: dict[str, Any], raw: Any, created: int, observed: int) -> None:
        """Add `op` to the chunk if it is new or a changed open operation."""
        op_id = op["id"]
        known = self.open.get(op_id)
        if known is not None:
            self.seen.add(op_id)
            fp = fingerprint(op)
            if fp == known.fingerprint:
                return
            version = known.version + 1
            self.chunk.changed += 1
        else:
            fp = None
            version = 1
            self.chunk.new += 1
        c = self.chunk
        c.ops.append(op)
        c.raws.append(raw)
        c.created_us.append(created)
        c.versions.append(version)
        c.observed_us.append(observed)
        if is_terminal(op):
            if known is not None:
                c.open_deletes.add(op_id)
                c.open_upserts.pop(op_id, None)
                del self.open[op_id]
        else:
            entry = OpenOp(
                op_id,
                self.pid,
                created,
                op.get("status"),
                fp or fingerprint(op),
                version,
                observed,
            )
            c.open_upserts[op_id] = entry
            c.open_deletes.discard(op_id)
            if known is not None:
                # Only operations open from before are tracked here; new ones live in the chunk
                # until committed (a backfill meets thousands: keep the walk's memory flat).
                self.open[op_id] = entry

    def _is_new(self, op_id: str, created: int) -> bool:
        cp = self.cp
        if cp.checkpoint_us is None or created > cp.checkpoint_us:
            return True
        return created == cp.checkpoint_us and op_id not in cp.boundary_ids

    def _flush(self) -> None:
        if (
            self.chunk.rows
            or self.chunk.open_deletes
            or self.chunk.progress
            or self.chunk.completed
        ):
            self.result.new += self.chunk.new
            self.result.changed += self.chunk.changed
            self.emit(self.chunk)
        self.chunk = Chunk(self.pid)

    # -- the walk -------------------------------------------------------------------------

    def _page(
        self, cursor: str | None
    ) -> tuple[list[dict[str, Any]], list[Any], list[int], str | None, int]:
        page = self.client.list_operations(self.pid, limit=self.limits.page_size, cursor=cursor)
        observed = now_us()
        self.result.pages += 1
        ops = page.operations
        if not all(isinstance(o, dict) and isinstance(o.get("id"), str) for o in ops):
            raise ApiError(f"project {self.pid}: malformed operations page (no id on an item)")
        try:
            created = created_micros(ops)
        except ValueError as exc:
            raise ApiError(f"project {self.pid}: malformed operations page ({exc})") from None
        if len(ops) > 1 and created[0] > created[-1]:
            self.density = (created[0] - created[-1]) / (len(ops) - 1)
        return ops, page.raw, created, page.cursor, observed

    def run(self) -> WalkResult:
        try:
            resumed = self.cp.resume_cursor is not None
            at_end, lowest, cursor = self._main_walk()
            if resumed:
                # The finished walk was an interrupted one: operations created since it began
                # sit above its top. Walk again from the newest, down to the new checkpoint.
                at_end, lowest, cursor = self._main_walk()
        except NotFoundError:
            self.result.deleted = True
            self.chunk = Chunk(self.pid)
            return self.result
        self._refresh_open(at_end, lowest, cursor)
        self.result.open_left = sum(1 for i in self.open if i not in self.seen)
        return self.result

    def _main_walk(self) -> tuple[bool, int | None, str | None]:
        """Walk down to the checkpoint; returns (list exhausted, lowest created seen, cursor)."""
        cp = self.cp
        limit = self.limits.page_size
        resuming = cp.resume_cursor is not None
        cursor = cp.resume_cursor
        top = cp.walk_top_us if resuming else None
        top_ids: set[str] = set(cp.walk_top_ids) if resuming else set()
        lowest: int | None = None
        tail_ids: set[str] = set()  # ids at `lowest`: a re-sent boundary must not count twice
        at_end = False
        while True:
            if self.cancel.is_set():
                raise InterruptedError("run cancelled")
            try:
                ops, raws, created, next_cursor, observed = self._page(cursor)
            except (ApiError, InterruptedError):
                # Keep what this walk already read: commit it with the cursor to resume from.
                self.chunk.progress = (top, frozenset(top_ids), cursor) if top is not None else None
                self._flush()
                raise
            if not ops:
                at_end = True
                break
            for op, raw, c in zip(ops, raws, created):
                op_id = op["id"]
                if lowest is not None and (c > lowest or (c == lowest and op_id in tail_ids)):
                    continue  # already read in this walk (overlapping pages)
                if top is None or c > top:
                    top, top_ids = c, {op_id}
                elif c == top:
                    top_ids.add(op_id)
                if op_id in self.open or self._is_new(op_id, c):
                    self._record(op, raw, c, observed)
                if lowest is None or c < lowest:
                    lowest, tail_ids = c, {op_id}
                elif c == lowest:
                    tail_ids.add(op_id)
            reached = cp.checkpoint_us is not None and created[-1] < cp.checkpoint_us
            if reached:
                cursor = next_cursor
                break
            if is_last_page(len(ops), limit, next_cursor, cursor):
                at_end = True
                break
            cursor = next_cursor
            if self.chunk.rows >= self.limits.flush_rows:
                self.chunk.progress = (top, frozenset(top_ids), cursor)
                self._flush()
        # The walk is complete: move the checkpoint to the newest instant it saw.
        if top is None or (cp.checkpoint_us is not None and top < cp.checkpoint_us):
            completed = (cp.checkpoint_us, cp.boundary_ids)
        elif cp.checkpoint_us is not None and top == cp.checkpoint_us:
            completed = (top, frozenset(top_ids) | cp.boundary_ids)
        else:
            completed = (top, frozenset(top_ids))
        self.chunk.completed = completed
        self._flush()
        cp.checkpoint_us, cp.boundary_ids = completed
        cp.walk_top_us, cp.walk_top_ids, cp.resume_cursor = None, frozenset(), None
        return at_end, lowest, cursor

    def _refresh_open(self, at_end: bool, lowest: int | None, cursor: str | None) -> None:
        """Re-read open operations the walk did not pass (bounded; the rest wait a run)."""
        pending = [o for i, o in self.open.items() if i not in self.seen]
        if not pending:
            return
        extend_left = self.limits.max_extend_pages
        limit = self.limits.page_size
        while not at_end and cursor and extend_left > 0 and lowest is not None:
            below = [o for o in pending if o.created_us < lowest]
            if not below:
                break
            span = lowest - min(o.created_us for o in below)
            density = self.density
            pages_needed = 1 if density is None else math.ceil(span / max(density, 1.0) / limit)
            if pages_needed > min(len(below), extend_left):
                break  # GETs are cheaper
            try:
                ops, raws, created, next_cursor, observed = self._page(cursor)
            except ApiError:
                self._flush()
                raise
            extend_left -= 1
            if not ops:
                break
            for op, raw, c in zip(ops, raws, created):
                if op["id"] in self.open and op["id"] not in self.seen:
                    self._record(op, raw, c, observed)
            lowest = min(lowest, created[-1])
            if is_last_page(len(ops), limit, next_cursor, cursor):
                at_end = True
            cursor = next_cursor
            pending = [o for i, o in self.open.items() if i not in self.seen]
        pending.sort(key=lambda o: o.checked_us)
        for entry in pending[: self.limits.max_gets]:
            if self.cancel.is_set():
                break
            try:
                op = self.client.get_operation(self.pid, entry.id)
            except NotFoundError:
                # Gone (retention deletes old operations): stop tracking, keep its history.
                log.info("operation %s of %s is gone; no longer tracked", entry.id, self.pid)
                self.chunk.open_deletes.add(entry.id)
                self.open.pop(entry.id, None)
                continue
            except ApiError:
                self._flush()
                raise
            finally:
                self.result.gets += 1
            if not isinstance(op, dict) or op.get("id") != entry.id:
                raise ApiError(f"project {self.pid}: malformed operation {entry.id}")
            try:
                [op_created] = created_micros([op])
            except ValueError as exc:
                raise ApiError(f"project {self.pid}: malformed operation ({exc})") from None
            self._record(op, encode_raw(op), op_created, now_us())
            self.seen.add(entry.id)
            if entry.id in self.open and self.open[entry.id] is entry:
                # Unchanged: remember that it was checked, so the GET rotation stays fair.
                entry.checked_us = now_us()
                self.chunk.open_upserts[entry.id] = entry
        self._flush()
