"""The walk of one project: newest first by cursor down to the tie-safe checkpoint.

Checkpoint (DESIGN.md): `checkpoint_us` is the newest `created_at` that a completed walk saw and
`boundary_ids` the ids it saw in that same second. `created_at` has whole seconds and several
operations often share one (PRODUCT.md), so the walk continues until it has seen an operation of
a strictly older second; in the checkpoint's second, an id outside `boundary_ids` is new. Stopping
at `<=` would lose late arrivals in the boundary second; `<` would re-add it. Comparisons are by
whole second: the API once sent one `created_at` with a fraction among whole-second neighbours,
and its true order is only known to the second.

The checkpoint never moves above what the API can have served when the walk began (`ceiling`:
its start by the API's clock, from the Date header): an operation created "in the future" (a
node's clock ahead, a bad record of 2099) made it the checkpoint, and every operation created
after it was older, for ever. Such an operation is exported once and stays tracked while it sits
above the ceiling (its later change is a new version, its next read no second copy); a later walk
whose ceiling has passed it takes it into the checkpoint as any other.

Pages may overlap (an inclusive cursor re-sends the operation it names): duplicates are dropped
by id against the previous page, never by comparing timestamps, so no operation the API returned
is skipped unless this walk already holds it.

Open operations (seen non-terminal before) are refreshed when their schedule makes them due
(`exporter.engine.schedule`): free when the walk passes them, else by walking further or by GETting
them one by one, whichever costs fewer requests (PRODUCT.md, minimum requests). A freshly
finished operation stays tracked until it has been finished for a settling window (by its
`updated_at`): the API was seen filling `total_duration_ms` after the status turned `finished`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Callable, Container, Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from exporter.api.client import CLOCK_SKEW_LIMIT, ApiClient
from exporter.api.paging import Pager
from exporter.core.errors import ApiError, NotFoundError, UnknownProjectError
from exporter.core.model import NAMES_REQUESTS, Chunk
from exporter.core.names import BRANCH, ENDPOINT, Listings
from exporter.core.operation import Operation, operations_from
from exporter.core.timeutil import to_micros
from exporter.engine.budget import UNBOUNDED, Budget, Reservation
from exporter.engine.records import created_micros, encode_raw, fingerprint, is_terminal
from exporter.engine.schedule import STRICT, RefreshSchedule
from exporter.store.state import TERMINAL_STATUSES, OpenOp, ProjectCheckpoint

log = logging.getLogger("opsaudit.walk")

PAGE_SIZE = 1000  # the API's maximum (PRODUCT.md); always sent: no limit may mean "everything"
BRANCHES_PAGE = 10_000  # the branches listing's maximum `limit` (PRODUCT.md, names)
NAMES_MAX_AGE_US = 86_400 * 1_000_000  # --names-max-age's default: 24 h
US_PER_SECOND = 1_000_000
# A 404 on one operation's GET may be transient; after this many in a row (one per run) it is
# taken as gone, if retention may have deleted it (RETENTION_US).
MAX_MISSES = 3
# "Operations older than 6 months may be deleted" (PRODUCT.md, Retention) is the one way an
# operation of a live project is known to go, and six calendar months are at most 184 days. A
# younger operation's 404s are transient however many runs they last: taken as gone, a 404 blip
# over three runs (back to back, or a cron's quarter of an hour) would stop the re-reads of
# every open operation GETted meanwhile, for good, with its `operations` row stale.
RETENTION_US = 184 * 86_400 * US_PER_SECOND
# A finished operation stays tracked until its updated_at is this old when read: the settling
# window (the in-place change seen on the real API came right after the status turned
# `finished`; a single look seconds later, as a killed run and its re-run make, can miss it).
FRESH_US = 900 * US_PER_SECOND
# An operation created less than this before the branches and endpoints listings were read
# (or after) may name a branch newer than they are: its unknown ids make them due again, not
# "known unlisted". The margin covers the client's and the API's clocks differing.
LISTING_SKEW_US = 60 * US_PER_SECOND


# The API's clock ahead of this host's by up to this when its Date header is unknown: the
# ceiling allows it (operations created since the walk began are then never below it).
UNKNOWN_SKEW_US = int(CLOCK_SKEW_LIMIT * US_PER_SECOND)


# A stored checkpoint this far above the walk's ceiling was taken from an operation created
# in the future, by an opsaudit before the ceiling (`_refuse_checkpoint_ahead`): never by
# skew alone, which the ceiling allows for.
CHECKPOINT_AHEAD_US = 3600 * US_PER_SECOND


_BRANCH_ID = attrgetter("branch_id")
_ENDPOINT_ID = attrgetter("endpoint_id")


def second(us: int) -> int:
    return us // US_PER_SECOND


@dataclass(frozen=True)
class WalkLimits:
    """Bounds of one project's walk."""

    page_size: int = PAGE_SIZE
    flush_rows: int = 2_000  # hand rows to storage at least this often (flat memory)
    # Bounds of the refresh of open operations, per project and run (None: none; the rest wait
    # a run). Unbounded by default: a sync that exits 0 has re-read every open operation, by the
    # cheapest plan; --time-budget / --max-requests are how a run is bounded (outcome budget).
    max_extend_pages: int | None = None  # pages walked past the checkpoint to refresh open ops
    max_gets: int | None = None  # single-operation GETs


@dataclass
class WalkResult:
    """What one project's walk did."""

    project_id: str
    pages: int = 0
    gets: int = 0
    new: int = 0
    changed: int = 0
    deleted: bool = False  # the API answered 404 for the project
    open_left: int = 0  # due open operations not refreshed this run (bounds reached)
    names_requests: int = 0  # branches + endpoints listing requests
    # The names were due but the budget (or the run's stop) left them for a later run: the
    # walk is not done, the project counts as left (PRODUCT.md: a run says what it left).
    names_left: bool = False


@dataclass
class _Top:
    """The newest second a walk has read: the first created_at read in it and its ids."""

    us: int | None = None
    ids: set[str] = field(default_factory=set)
    second: int | None = None

    def __post_init__(self) -> None:
        if self.us is not None:
            self.second = second(self.us)


def now_us() -> int:
    """The wall clock in microseconds: the default clock of a run (`SyncConfig.clock`)."""
    return time.time_ns() // 1000


_OpsPage = tuple[list[Operation], list[Any], list[int], int]


class Turn:
    """A walk's place in the order its run started the walks (stalest first), for its first
    claim on a bounded budget: it waits for the walk before it to have claimed (or ended)."""

    def __init__(self, before: threading.Event | None, mine: threading.Event):
        self.before = before
        self.mine = mine

    def wait(self, cancel: threading.Event) -> None:
        # Polled: a walk cancelled before it started never claims (the run is stopping).
        while self.before is not None and not self.before.wait(0.05):
            if cancel.is_set():
                return

    def done(self) -> None:
        self.mine.set()


def turns(count: int) -> list[Turn]:
    """The turns of `count` walks, in the order they are started."""
    events = [threading.Event() for _ in range(count)]
    return [Turn(events[k - 1] if k else None, events[k]) for k in range(count)]


class ProjectWalk:
    """Walks one project and emits `Chunk`s; the caller commits them in order."""

    def __init__(
        self,
        client: ApiClient,
        checkpoint: ProjectCheckpoint,
        emit: Callable[[Chunk], None],
        limits: WalkLimits = WalkLimits(),
        cancel: threading.Event | None = None,
        budget: Budget = UNBOUNDED,
        allowed_gets: Container[str] | None = None,
        schedule: RefreshSchedule = STRICT,
        clock: Callable[[], int] = now_us,
        names_max_age_us: int = NAMES_MAX_AGE_US,
        turn: Turn | None = None,
    ):
        self.client = client
        self.schedule = schedule
        self.clock = clock  # microseconds: when things were read, and what is due
        # The lists of branches and endpoints are read again once older than this (0: always).
        self.names_max_age_us = names_max_age_us
        self.unknown_ids: set[str] = set()  # branch/endpoint ids met that no listing showed
        self.names_tried = False  # the listings are read at most once per run (PRODUCT.md)
        self.listed_at: int | None = None  # ... and were, in this run, at this time
        self.names_error: ApiError | None = None  # a listing failed in the walk: raised after it
        self.budget = budget
        # The single-operation GETs this run may spend on this project (None: any, up to
        # `limits.max_gets`): the run hands them out oldest-checked first across the account.
        self.allowed_gets = allowed_gets
        self.turn = turn
        self.cp = checkpoint
        self.pid = checkpoint.project_id
        self.emit = emit
        self.limits = limits
        self.cancel = cancel or threading.Event()
        self.result = WalkResult(self.pid)
        self.open = dict(checkpoint.open_ops)  # current view, updated as chunks are emitted
        self.seen: set[str] = set()  # tracked ids re-read this run
        self.chunk = Chunk(self.pid)
        self.density: float | None = None  # microseconds between operations, from the pages
        # The oldest created_at the last main walk read: where the refresh extends its pager.
        self.lowest: int | None = None
        self.due: set[str] = set()  # tracked ids this run must re-read (the schedule)
        # Operations created at or after this (the second after the walk's ceiling) are above
        # what the API can have served: tracked, never the checkpoint (`_main_walk`).
        self.above_us: float = math.inf

    # -- classification -------------------------------------------------------------------

    def _record(self, op: Operation, raw: Any, created: int, observed: int) -> None:
        """Add `op` (`raw` its JSON text) to the chunk if it is new or a changed tracked one."""
        op_id = op.id
        known = self.open.get(op_id)
        if known is None:
            self._record_new([op], [raw], [created], observed)
            return
        c = self.chunk
        self.seen.add(op_id)
        fp = fingerprint(raw)
        if fp == known.fingerprint:
            if (
                not known.is_open
                and _settled(known.changed_us, observed)
                and not self._above(created)
            ):
                # Finished and unchanged for the settling window: forget it.
                self._forget(op_id)
            else:
                # Checked: the schedule, the GET rotation and `check` see when it was last
                # re-read. A state from before the schedule learns when it last changed.
                changes: dict[str, Any] = {"checked_us": observed, "misses": 0}
                if known.changed_us is None:
                    changes["changed_us"] = _changed_us(op, None, observed)
                    changes["retry_us"] = _micros(op.retry_at)
                self.open[op_id] = entry = _replace(known, **changes)
                c.open_upserts[op_id] = entry
            return
        version = known.version + 1
        c.changed += 1
        self._note_names((op,), (created,))
        c.ops.append(op)
        c.raws.append(raw)
        c.created_us.append(created)
        c.versions.append(version)
        c.observed_us.append(observed)
        self._track(op, raw, created, version, observed, known, fp)

    def _record_new(
        self, ops: list[Operation], raws: list[Any], created: list[int], observed: int
    ) -> None:
        """Add operations this dataset has never held, a page's run of them at once: list
        operations, no call per operation (client CPU, issue 24)."""
        c = self.chunk
        n = len(ops)
        c.new += n
        self._note_names(ops, created)
        c.ops += ops
        c.raws += raws
        c.created_us += created
        c.versions += [1] * n
        c.observed_us += [observed] * n
        # Finished long ago: nothing more will change. The rest may: open, or finished within
        # the settling window.
        terminal = TERMINAL_STATUSES
        fresh = _fresh(ops, observed)
        above = self.above_us
        for k in [
            k
            for k, op in enumerate(ops)
            if op.status not in terminal or fresh[k] or created[k] >= above
        ]:
            self._track(ops[k], raws[k], created[k], 1, observed, None, None)

    def _note_names(self, ops: Sequence[Operation], created: Sequence[int]) -> None:
        """The branch and endpoint ids these rows name that no listing showed yet."""
        try:
            met = set(map(_BRANCH_ID, ops))
            met.update(map(_ENDPOINT_ID, ops))
        except TypeError:  # an id that is a JSON object or list: not an id (kept in `raw`)
            met = {i for i in (*map(_BRANCH_ID, ops), *map(_ENDPOINT_ID, ops)) if _hashable(i)}
        met -= self.cp.known_ids
        met = {i for i in met if isinstance(i, str)}  # None (no branch) and odd values are no ids
        if not met:
            return
        if self.listed_at is not None:
            # This run's listings, read after the operation was created, do not have it
            # (deleted): known unlisted, not a reason to read them again. Unless the operation
            # was created about when they were read, or since (listings read before the walk,
            # an earlier run having left them due): its branch may be newer than they are.
            since = self.listed_at - LISTING_SKEW_US
            late = {
                i
                for op, us in zip(ops, created)
                if us >= since
                for i in (op.branch_id, op.endpoint_id)
                if isinstance(i, str) and i in met  # an odd id (a JSON object) is unhashable
            }
            self.chunk.unlisted |= met - late
            if late:
                self.unknown_ids |= late
                self.chunk.names_due = True  # read again in the next run
        else:
            self.unknown_ids |= met
            self.chunk.names_due = True

    def _track(
        self,
        op: Operation,
        raw: Any,
        created: int,
        version: int,
        observed: int,
        known: OpenOp | None,
        fp: bytes | None,
    ) -> None:
        """Keep `op` tracked while it may still change (open, or just finished and settling);
        stop tracking it once finished for the settling window."""
        op_id = op.id
        c = self.chunk
        changed = _changed_us(op, known, observed)
        if is_terminal(op) and _settled(changed, observed) and not self._above(created):
            if known is not None:
                self._forget(op_id)  # finished long enough ago: nothing more will change
            return
        # Open, or just finished (tracked while it settles: it may still change in place).
        fp = fp or fingerprint(raw)
        entry = OpenOp(
            op_id,
            self.pid,
            created,
            op.status,
            fp,
            version,
            observed,
            changed_us=changed,
            retry_us=_micros(op.retry_at),
        )
        c.open_upserts[op_id] = entry
        c.open_deletes.discard(op_id)
        if known is not None:
            # Only operations tracked from before are kept here; new ones live in the chunk
            # until committed (a backfill meets thousands: keep the walk's memory flat).
            self.open[op_id] = entry

    def _above(self, created: int) -> bool:
        """Created above this walk's ceiling: tracked, whatever its status, until a walk's
        ceiling passes it (the checkpoint cannot cover it before: no second copy)."""
        return created >= self.above_us

    def _far_ahead(self, us: int) -> bool:
        """Too far above the walk's ceiling for skew: from a clock or a record in the future."""
        return us >= self.above_us + CHECKPOINT_AHEAD_US

    def _forget(self, op_id: str) -> None:
        self.chunk.open_deletes.add(op_id)
        self.chunk.open_upserts.pop(op_id, None)
        self.open.pop(op_id, None)

    def _flush(self) -> None:
        if not self.chunk.empty:
            self.result.new += self.chunk.new
            self.result.changed += self.chunk.changed
            self.emit(self.chunk)
        self.chunk = Chunk(self.pid)

    # -- pages ----------------------------------------------------------------------------

    def _admit(self, reserved: Reservation | None = None) -> None:
        """Before each request: stop when the run was cancelled or its budget (or the request's
        `reserved` part of it) is spent."""
        if self.cancel.is_set():
            raise InterruptedError("run cancelled")
        with self._first_claim():
            if not (self.budget.take() if reserved is None else reserved.take()):
                raise InterruptedError("budget reached")

    @contextlib.contextmanager
    def _first_claim(self) -> Iterator[None]:
        """The walk's first claim on the run's budget waits for the walks before it (stalest
        first) to have made theirs: under a small --max-requests the walks that started at the
        same moment raced for it, and the stalest project's names could lose, run after run."""
        turn, self.turn = self.turn, None
        if turn is None:
            yield
            return
        try:
            turn.wait(self.cancel)
            yield
        finally:
            turn.done()

    def _fetch(self, cursor: str | None) -> tuple[_OpsPage, int, str | None]:
        self._admit()
        page = self.client.list_operations(self.pid, limit=self.limits.page_size, cursor=cursor)
        observed = self.clock()
        self.result.pages += 1
        ops = page.operations
        if not all(isinstance(o.id, str) for o in ops):
            raise ApiError(f"project {self.pid}: malformed operations page (no id on an item)")
        try:
            created = created_micros(ops)
        except ValueError as exc:
            raise ApiError(f"project {self.pid}: malformed operations page ({exc})") from None
        if len(ops) > 1 and max(created) > min(created):
            self.density = (max(created) - min(created)) / (len(ops) - 1)
        return (ops, page.raw, created, observed), len(ops), page.cursor

    def run(self) -> WalkResult:
        try:
            resumed = self.cp.resume_cursor is not None
            if self._names_left_before():
                self._read_names_first()
            pager = self._main_walk(names=not resumed)
            if resumed:
                # The finished walk was an interrupted one: operations created since it began
                # sit above its top. Walk again from the newest, down to the new checkpoint.
                pager = self._main_walk(names=True)
            self._refresh_open(pager)
            if self.names_error is not None:
                raise self.names_error
            if not self.names_tried and self._names_wanted():
                # Not read in the walk (no page, or the refresh met an unknown id).
                try:
                    self._read_names()
                    self._flush()
                except NotFoundError:
                    self.chunk = Chunk(self.pid)
                    raise self._listing_not_found() from None
                except InterruptedError:
                    # The budget (or the run's stop) came between the operations and the names:
                    # the operations are committed; the names stay due (never read, or
                    # `names_due`) and the project is left for the next run.
                    self.chunk = Chunk(self.pid)
                    self.result.names_left = True
        except NotFoundError:
            return self._not_found()
        except (ApiError, InterruptedError):
            self._flush()  # keep what was read; the caller records the error after it
            raise
        self.result.open_left = sum(1 for i in self.due if i in self.open and i not in self.seen)
        return self.result

    def _not_found(self) -> WalkResult:
        """The project's operations answered 404: a mistyped --project, a failed project, or a
        deleted one."""
        if not self.cp.seen:
            # Never listed, never walked: a mistyped --project, not a deleted project.
            self._flush()
            raise UnknownProjectError(
                f"project {self.pid} not found (404), and no listing ever showed it: "
                "check the --project id (and that the key can read it)",
                status=404,
            ) from None
        try:
            # One 404 of its operations (a proxy, a moment of the API) is no proof it is gone:
            # taken for one, its open operations were dropped for good and every later run
            # said ok while they kept their old state. The project itself must answer 404 too.
            self._admit_confirmation()
            self.client.get_project(self.pid)
        except NotFoundError:
            pass
        except (ApiError, InterruptedError):
            self._flush()
            raise
        else:
            self._flush()
            raise ApiError(
                f"project {self.pid}: its operations answered 404, the project itself did "
                "not; tried again in the next run",
                status=404,
            )
        # The project is gone (PRODUCT.md: deleted projects keep their history). Deleted since
        # the listing, or a moment of the API: the pair cannot tell, the next listing does. Its
        # open operations stay tracked, as for a project a listing left out (`_LISTED_PROJECT`:
        # not read, counted or checked while it is gone); a listing that shows it again has
        # them re-read. Dropped here, they kept their old state for good, every run exit 0.
        self.result.deleted = True
        self.chunk = Chunk(self.pid, deleted_us=self.clock())
        self._flush()
        return self.result

    def _admit_confirmation(self) -> None:
        """`_admit` for the GET that tells a deleted project from a 404 of its operations. When
        the budget (spent by the other walks meanwhile) refuses it, the 404 is not lost as a
        stop: taken for a spent budget's, the project was left, exit 0, every run (stalest,
        it is picked first) with no error. It fails, as without a budget, and says why."""
        try:
            self._admit()
        except InterruptedError:
            if self.cancel.is_set() or self.budget.stopped:
                raise  # the run is stopping: nothing of this project is judged
            raise ApiError(
                f"project {self.pid}: its operations answered 404; its own GET (is it gone?) "
                "did not fit in the run's --max-requests or --time-budget: tried again in the "
                "next run (raise the budget if this repeats)",
                status=404,
            ) from None

    def _main_walk(self, names: bool) -> Pager[_OpsPage]:
        """Walk down to the checkpoint; returns the pager, positioned where the walk stopped.
        With `names`, reads the listings as soon as they are wanted (after a page)."""
        cp = self.cp
        # The walk whose pager the refresh extends is this one: a resumed walk's bottom (the
        # oldest operation of all, in a backfill) left every open operation "above" it.
        self.lowest = None
        resuming = cp.resume_cursor is not None
        # When this walk read its first page. A resumed walk's was read in an earlier run,
        # and what happened since is for the walk from the newest to read, which a budget may
        # leave for later: the last whole walk's start stays (`--skip-idle` took a project
        # with new operations for idle, for up to --full-sweep-every).
        start = self.clock()
        walked_from = None if resuming else start
        self.above_us = self._ceiling(start)
        # No answer of the API read yet (`--project`: no listing before): the ceiling allows a
        # minute of skew until the first page's Date header says what it is.
        guessed = self.client.clock_skew is None
        self._refuse_checkpoint_ahead(resuming)
        pager = Pager(
            self._fetch,
            self.limits.page_size,
            cp.resume_cursor,
            what=f"project {self.pid}",
            ids=_page_ids,
        )
        top = _Top(cp.walk_top_us, set(cp.walk_top_ids)) if resuming else _Top()
        # Ids of the previous page: an overlapping page (inclusive cursor) re-sends some.
        previous: set[str] = set(cp.walk_tail_ids) if resuming else set()
        tail_ids: frozenset[str] = frozenset(previous)
        while True:
            try:
                page = pager.next()
            except (ApiError, InterruptedError):
                # Keep what this walk already read: commit it with the cursor to resume from.
                if top.us is not None:
                    self.chunk.progress = (top.us, frozenset(top.ids), pager.cursor, tail_ids)
                raise
            if page is None:
                break
            if guessed and self.client.clock_skew is not None:
                self.above_us, guessed = self._ceiling(start), False
            ops, raws, created, observed = page.items
            seconds = list(map(second, created))
            previous = self._take_page(ops, raws, created, seconds, observed, previous, top)
            self.lowest = min(created) if self.lowest is None else min(self.lowest, *created)
            oldest = min(seconds)
            tail_ids = frozenset(o.id for o, s in zip(ops, seconds) if s == oldest)
            if names and not self.names_tried and self._names_wanted():
                # Read now, into the chunk that holds the rows naming them, not after the walk:
                # the rows' events carry the names (PRODUCT.md, Events), and every operation
                # of this walk was created before this read, so its branch, unless deleted
                # since, is listed.
                try:
                    self._read_names()
                except NotFoundError:
                    self.names_error = self._listing_not_found()
                except ApiError as exc:
                    # The walk goes on (its rows are committed, the names stay due); the
                    # project fails once it is complete, as when the names came last.
                    self.names_error = exc
                except InterruptedError:
                    # The next page stops the walk; the names stay due, the project is left.
                    self.result.names_left = True
            if cp.checkpoint_us is not None and oldest < second(cp.checkpoint_us):
                break  # reached the checkpoint
            if pager.exhausted:
                break
            if self.chunk.rows >= self.limits.flush_rows:
                # No top yet: every row so far is above the ceiling, tracked, and a walk that
                # starts again from the newest reads them as such (nothing to resume from).
                if top.us is not None:
                    self.chunk.progress = (top.us, frozenset(top.ids), pager.cursor, tail_ids)
                self._flush()
        # The walk is complete: move the checkpoint to the newest second it saw.
        newest, newest_ids = top.us, top.ids
        if newest is None or (
            cp.checkpoint_us is not None and second(newest) < second(cp.checkpoint_us)
        ):
            completed = (cp.checkpoint_us, cp.boundary_ids)
        elif cp.checkpoint_us is not None and second(newest) == second(cp.checkpoint_us):
            completed = (max(newest, cp.checkpoint_us), frozenset(newest_ids) | cp.boundary_ids)
        else:
            completed = (newest, frozenset(newest_ids))
        self.chunk.completed = completed
        self.chunk.completed_us = self.clock()
        self.chunk.walked_from_us = walked_from
        self._flush()
        cp.checkpoint_us, cp.boundary_ids = completed
        cp.walk_top_us, cp.walk_top_ids, cp.resume_cursor = None, frozenset(), None
        cp.walk_tail_ids = frozenset()
        return pager

    def _ceiling(self, start: int) -> int:
        """The first microsecond above what the API can have served when the walk began at
        `start` (this host's clock): the end of that second by the API's clock (its Date
        header, read by the run's first answer), else with a minute allowed for skew."""
        skew = self.client.clock_skew
        ahead = UNKNOWN_SKEW_US if skew is None else round(skew * US_PER_SECOND)
        return (second(start + ahead) + 1) * US_PER_SECOND

    def _refuse_checkpoint_ahead(self, resuming: bool) -> None:
        """An opsaudit before the ceiling took the checkpoint from an operation created in the
        future (2099): every operation created since is older than it, never read again, and
        the run said ok. It cannot be told here which of them the dataset holds: the project
        fails, saying so, instead of exporting nothing for ever."""
        cp = self.cp
        marks = [cp.checkpoint_us] + ([cp.walk_top_us] if resuming else [])
        ahead = max((m for m in marks if m is not None), default=None)
        if ahead is None or not self._far_ahead(ahead):
            return
        when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(ahead // US_PER_SECOND))
        raise ApiError(
            f"project {self.pid}: its checkpoint ({when}) lies ahead of the API's clock: an "
            "older opsaudit took it from an operation created in the future, and operations "
            "created since may be missing from the trail; nothing is read for it: sync into a "
            "new --data-dir to export its whole history again"
        )

    def _raise_top(
        self, top: _Top, kept_ids: list[str], created: list[int], kept_seconds: list[int]
    ) -> None:
        """The newest second and the ids read in it, up to the ceiling; `top.us` is the first
        operation read in that second (its own created_at, maybe with a fraction)."""
        newest = max(kept_seconds, default=None)
        ceiling = self.above_us // US_PER_SECOND - 1
        if newest is not None and newest > ceiling:
            # Above what the API can have served (a node's clock ahead): never the checkpoint.
            newest = max((s for s in kept_seconds if s <= ceiling), default=None)
        if newest is None:
            return
        if top.second is None or newest > top.second:
            top.us, top.second = created[kept_seconds.index(newest)], newest
            top.ids = {i for i, s in zip(kept_ids, kept_seconds) if s == newest}
        elif newest == top.second:
            top.ids.update(i for i, s in zip(kept_ids, kept_seconds) if s == newest)

    def _take_page(
        self,
        ops: list[Operation],
        raws: list[Any],
        created: list[int],
        seconds: list[int],
        observed: int,
        previous: set[str],
        top: _Top,
    ) -> set[str]:
        """Classify one page of the main walk, over its lists (no call per operation: client
        CPU, issue 24): the ids this walk has not read yet, the newest second (`top`), and which
        operations are new or tracked. Returns all the page's ids (the next page's `previous`)."""
        page_ids = [op.id for op in ops]
        ids = set(page_ids)
        if len(ids) == len(page_ids) and previous.isdisjoint(ids):
            kept_ids, kept_seconds = page_ids, seconds
        else:
            # An overlapping page (inclusive cursor) re-sends some: each id once per walk.
            kept = []
            taken: set[str] = set()  # `ids` stays the page's: not kept ids (stored twice)
            for k, op_id in enumerate(page_ids):
                if op_id in previous or op_id in taken:
                    continue  # already read in this walk (overlapping pages)
                taken.add(op_id)
                kept.append(k)
            ops, raws = [ops[k] for k in kept], [raws[k] for k in kept]
            created, kept_seconds = [created[k] for k in kept], [seconds[k] for k in kept]
            kept_ids = [page_ids[k] for k in kept]
        self._raise_top(top, kept_ids, created, kept_seconds)
        cp, tracked = self.cp, self.open
        if cp.checkpoint_us is not None:
            # New: a second after the checkpoint's, or in it and not among its boundary ids.
            # Tracked: re-read, changed or not.
            cp_second, boundary = second(cp.checkpoint_us), cp.boundary_ids
            chosen = [
                k
                for k, (op_id, s) in enumerate(zip(kept_ids, kept_seconds))
                if op_id in tracked or s > cp_second or (s == cp_second and op_id not in boundary)
            ]
            if len(chosen) < len(kept_ids):
                ops, raws = [ops[k] for k in chosen], [raws[k] for k in chosen]
                created, kept_ids = [created[k] for k in chosen], [kept_ids[k] for k in chosen]
        # In page order: each run of new operations at once, each tracked one on its own.
        start = 0
        for k in [k for k, op_id in enumerate(kept_ids) if op_id in tracked] + [len(kept_ids)]:
            if k > start:
                self._record_new(ops[start:k], raws[start:k], created[start:k], observed)
            if k < len(kept_ids):
                self._record(ops[k], raws[k], created[k], observed)
            start = k + 1
        return ids

    # -- names (PRODUCT.md, names: when the two listings are read) ---------------------------

    def _names_wanted(self) -> bool:
        """The project's first walk, an id no listing showed yet (this run or one cut short),
        or lists older than --names-max-age; a no-change run within that age reads nothing."""
        cp = self.cp
        return (
            cp.names_read_us is None
            or cp.names_due
            or bool(self.unknown_ids)
            # A clock now behind the last read (stepped back) cannot tell their age: read.
            or not 0 <= self.clock() - cp.names_read_us < self.names_max_age_us
        )

    def _names_left_before(self) -> bool:
        """A walked project whose names an earlier run left unread (never listed, or an id
        they did not show since): read before the walk, while the run has time. After it, a
        --time-budget too short for a page and both listings cut them in every run, for ever
        (a new user's first hour: 41k of 49k operations without names, every run exit 0)."""
        cp = self.cp
        return cp.checkpoint_us is not None and (cp.names_read_us is None or cp.names_due)

    def _read_names_first(self) -> None:
        """`_read_names` before the walk: the walk's rows come into the same chunk (an id of an
        operation created since, unlisted, makes the names due again, as in any run)."""
        try:
            self._read_names()
        except NotFoundError:
            self.names_error = self._listing_not_found()
        except ApiError as exc:
            self.names_error = exc  # raised once the walk is done, as after a page
        except InterruptedError:
            self.result.names_left = True  # the walk's first page stops it too

    def _listing_not_found(self) -> ApiError:
        """A 404 of the branches or endpoints listing while the operations answered: no proof
        the project is gone (a proxy without the route), but its names could not be read. It
        said ok, run after run, with operations left unnamed: the project fails (exit 1, named
        in `check`), its operations committed, the names due for the next run."""
        return ApiError(
            f"project {self.pid}: the branches or endpoints listing answered 404 while its "
            "operations answered; its names are read again in the next run",
            status=404,
        )

    def _read_names(self) -> None:
        """Both listings, into the current chunk: committed with the rows read before them (a
        branch those operations name is listed by now), or not at all. When the budget cannot
        cover both, they stay due for a later run and the project counts as left. Once per run,
        whatever the outcome."""
        self.names_tried = True
        # Both first requests taken at once: the other walks' pages cannot take the second.
        with self._first_claim():
            reserved = self.budget.reserve(NAMES_REQUESTS)
        if reserved is None:
            self.result.names_left = True
            return
        try:
            branches: list[Any] = []
            cursor: str | None = None
            sent: set[str] = set()
            listed: set[Any] = set()
            while True:
                # `pagination.next` decides, not the page's length: the server may page below
                # the limit asked for (PRODUCT.md). A second page of branches is not reserved.
                self._admit(reserved if cursor is None else None)
                page, following = self.client.list_branches(
                    self.pid, limit=BRANCHES_PAGE, cursor=cursor
                )
                self.result.names_requests += 1
                # The same branches again under a new `next` each time: walked for ever, the
                # lock held (the operations' Pager refuses it likewise).
                ids = {b.get("id") for b in page if isinstance(b, dict)}
                if cursor is not None and ids and ids <= listed:
                    raise ApiError(
                        f"project {self.pid}: GET /projects/{{id}}/branches: the server served "
                        "the same page again (loop)"
                    )
                listed |= ids
                branches += page
                if following is None or following in sent or not page:
                    break
                sent.add(following)
                cursor = following
            self._admit(reserved)
            endpoints = self.client.list_endpoints(self.pid)
            self.result.names_requests += 1
        finally:
            reserved.release()  # what was not sent (a listing failed, the run stopped)
        read = Listings(
            self.clock(),
            {BRANCH.key: branches, ENDPOINT.key: endpoints},
            frozenset(self.unknown_ids),
        )
        self.chunk.names = read
        self.chunk.names_due = False  # committed with the listings, which clear it
        self.listed_at = read.observed_us
        listed = {
            o["id"]
            for objs in read.objects.values()
            for o in objs
            if isinstance(o, dict) and isinstance(o.get("id"), str)  # else it names nothing
        }
        self.cp.known_ids = self.cp.known_ids | listed | self.unknown_ids
        self.cp.names_read_us, self.cp.names_due = read.observed_us, False

    # -- refreshing open operations ---------------------------------------------------------

    def _extension_plan(self, pending: list[OpenOp], lowest: int, pages_left: float) -> int:
        """How many more pages to walk so that pages + GETs of the rest is cheapest.

        `min over k of k + (operations below the first k pages)` (PRODUCT.md, minimum
        requests), with each operation's page estimated from the page density seen so far.
        """
        if pages_left <= 0 or not pending:
            return 0
        span = max(self.density or 0.0, 1.0) * self.limits.page_size
        # An operation in `lowest`'s second may sit on the next page: it counts as page 1.
        depth = sorted(
            max(1, math.ceil((lowest - o.created_us) / span)) if self.density else 1
            for o in pending
        )
        best_k, best_cost = 0, len(depth)
        for i, d in enumerate(depth):  # walking d pages covers depth[: i + 1] (and ties)
            if d > pages_left:
                break
            cost = d + (len(depth) - i - 1)
            if cost < best_cost:
                best_k, best_cost = d, cost
        return best_k

    def _refresh_open(self, pager: Pager[_OpsPage]) -> None:
        """Re-read the due tracked operations the walk did not pass, by the cheapest plan
        (bounded: the rest wait a run). The others wait for their schedule; a walk that
        passes one re-reads it anyway, for free."""
        now = self.clock()
        self.due = {
            i for i, o in self.open.items() if i not in self.seen and self.schedule.due(o, now)
        }
        pending = [o for i, o in self.open.items() if i in self.due]
        if not pending:
            return
        bound = self.limits.max_extend_pages
        pages_left: float = math.inf if bound is None else bound
        lowest = self.lowest
        while not pager.exhausted and lowest is not None and pages_left > 0:
            below = [o for o in pending if second(o.created_us) <= second(lowest)]
            if self._extension_plan(below, lowest, pages_left) == 0:
                break
            page = pager.next()
            pages_left -= 1
            if page is None:
                break
            ops, raws, created, observed = page.items
            for op, raw, c in zip(ops, raws, created):
                if op.id in self.open and op.id not in self.seen:
                    self._record(op, raw, c, observed)
            lowest = min(lowest, *created)
            pending = [o for i, o in self.open.items() if i in self.due and i not in self.seen]
        if self.allowed_gets is not None:
            pending = [o for o in pending if o.id in self.allowed_gets]
        pending.sort(key=lambda o: o.checked_us)
        for entry in pending[: self.limits.max_gets]:
            self._get_one(entry)
        self._flush()

    def _get_one(self, entry: OpenOp) -> None:
        self._admit()
        try:
            op = self.client.get_operation(self.pid, entry.id)
        except NotFoundError:
            self.result.gets += 1
            self.seen.add(entry.id)
            now = self.clock()
            # Gone (retention deletes old operations; one created in the future, tracked for
            # that, no retention can have deleted: the API dropped it): stop tracking it, keep
            # its history. It was GET each run for ever.
            removed = now - entry.created_us >= RETENTION_US or self._far_ahead(entry.created_us)
            if entry.misses + 1 >= MAX_MISSES and removed:
                log.info("operation %s of %s is gone; no longer tracked", entry.id, self.pid)
                self.chunk.open_deletes.add(entry.id)
                self.open.pop(entry.id, None)
            else:
                missed = _replace(entry, checked_us=now, misses=entry.misses + 1)
                self.open[entry.id] = self.chunk.open_upserts[entry.id] = missed
            return
        self.result.gets += 1
        if not isinstance(op, dict) or op.get("id") != entry.id:
            raise ApiError(f"project {self.pid}: malformed operation {entry.id}")
        [operation] = operations_from([op])
        try:
            [op_created] = created_micros([operation])
        except ValueError as exc:
            raise ApiError(f"project {self.pid}: malformed operation ({exc})") from None
        self._record(operation, encode_raw(op), op_created, self.clock())


def _page_ids(page: _OpsPage) -> list[str]:
    """The operation ids of a fetched page (the pager tells a page served again by them)."""
    return [op.id for op in page[0]]


def _replace(entry: OpenOp, **changes: Any) -> OpenOp:
    values = {**vars(entry), **changes}
    return OpenOp(**values)


def _micros(value: Any) -> int | None:
    """An RFC 3339 field as microseconds; None when absent or not a timestamp."""
    if not isinstance(value, str):
        return None
    try:
        return to_micros(value)
    except ValueError:
        return None


def _changed_us(op: Operation, known: OpenOp | None, observed: int) -> int:
    """When this state of `op` came about: its updated_at; for a change made in place (the
    same or an older updated_at than the state before) or no updated_at, when it was seen."""
    updated = _micros(op.updated_at)
    if updated is None:
        return observed
    if known is not None and known.changed_us is not None and updated <= known.changed_us:
        return observed
    return updated


def _settled(changed_us: int | None, observed: int) -> bool:
    """Finished for the settling window (or since an unknown time): no more in-place change."""
    return changed_us is None or observed - changed_us >= FRESH_US


def _fresh(ops: Sequence[Operation], observed: int) -> list[bool]:
    """Per operation: whether it finished recently enough to still change in place (its
    updated_at within the settling window; False without one)."""
    # The API's usual form ("2025-01-16T21:02:04Z") compares as text with the oldest fresh
    # second ("2025-01-16T20:47:04", which sorts before it with its Z): no parse, no call per
    # operation of a backfill (client CPU, PRODUCT.md).
    after = _fresh_after(observed // US_PER_SECOND)
    return [
        (u >= after if len(u) == 20 and u[19] == "Z" else _fresh_parsed(u, observed))
        if isinstance(u := op.updated_at, str)
        else False
        for op in ops
    ]


def _hashable(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _fresh_parsed(updated: str, observed: int) -> bool:
    try:
        return observed - to_micros(updated) < FRESH_US
    except ValueError:
        return False


@functools.lru_cache(maxsize=4)
def _fresh_after(observed_second: int) -> str:
    """The oldest `updated_at` (as UTC text) that counts as fresh at `observed_second`."""
    threshold = observed_second - FRESH_US // US_PER_SECOND
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(threshold))
