"""`sync()`: discovery, concurrent project walks, the single committer, and the run summary.

Workers walk projects in parallel and hand `Chunk`s to one committer thread, which writes them
as Parquet and commits files and checkpoints in one state transaction (see `store.local.dataset`). Batching
chunks of many projects into one commit keeps files few when ten thousand projects each bring a
handful of operations; each project still commits on its own schedule, and a failing project
never holds back the others. Everything a project's walk decides (rows, checkpoints, its error,
its deletion) goes through the committer, so state changes apply in the order they happened.
Progress reaches the caller through a `SyncObserver`, never stdout.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TypeVar

import pyarrow as pa

from exporter.api.client import (
    ApiClient,
    RequestStats,
    RetryPolicy,
    check_api_key,
    clock_skew_problem,
    validate_base_url,
)
from exporter.api.discovery import PROJECTS_PAGE, discover
from exporter.api.pacing import DEFAULT_MAX_RPS, ROUTE_MAX_RPS, Pacer
from exporter.core.errors import (
    ApiError,
    ApiUnavailableError,
    AuthError,
    ConfigError,
    ExitCode,
    NotFoundError,
    OpsauditError,
    StorageError,
    UnknownProjectError,
    check_types,
    redact,
)
from exporter.core.model import DEFAULT_BASE_URL, NAMES_REQUESTS, Outcome
from exporter.engine.budget import Budget
from exporter.engine.publish import publish
from exporter.engine.records import arrow_without_pandas, versions_table
from exporter.engine.schedule import DEFAULT_EVERY_US, RefreshSchedule
from exporter.engine.settings import check_settings, plain_values
from exporter.engine.walk import (
    Chunk,
    ProjectWalk,
    Turn,
    WalkLimits,
    WalkResult,
    now_us,
    turns,
)
from exporter.events.delivery import deliver
from exporter.events.follower import FileFollower
from exporter.events.outbox import EventsConfig, Outbox
from exporter.events.webhook import safe_host
from exporter.store.base import BIG_FILE_ROWS, Store
from exporter.store.opener import open_store
from exporter.store.state import Coverage

log = logging.getLogger("opsaudit.sync")

# Seconds a request in flight at --time-budget's end is given before it is cut: a page on its
# way is worth its wait, a trickled one is not (the run's lock holds off the next cron run).
IN_FLIGHT_GRACE = 10.0

_T = TypeVar("_T")

_EXIT_CODES = {
    Outcome.OK: ExitCode.OK,
    Outcome.BUDGET: ExitCode.OK,
    Outcome.PARTIAL: ExitCode.PARTIAL,
    Outcome.AUTH_FAILED: ExitCode.AUTH,
    # Stopped through `sync(stop=...)`: the CLI's Ctrl-C (SIGTERM's 143 is the CLI's to know).
    Outcome.INTERRUPTED: ExitCode.INTERRUPTED,
}


@dataclass
class SyncConfig:
    """Everything one run needs; the CLI builds it from flags and environment variables."""

    data_dir: Path | str  # a local directory, or s3:// gs:// az:// (exporter.store.readers)
    api_key: str = field(repr=False)  # never in a repr, a log line or a traceback
    base_url: str = DEFAULT_BASE_URL
    project_ids: list[str] | None = None  # --project: no listing
    org_ids: list[str] | None = None  # --org-id: list only these organizations
    max_rps: float | None = DEFAULT_MAX_RPS  # None or 0: no pacing
    route_max_rps: float = ROUTE_MAX_RPS  # the API's 40/s per route (benchmarks scale it)
    concurrency: int = 4  # projects walked at once (1 to 64)
    wait_for_lock: bool = False
    storage_options: list[str] = field(default_factory=list)  # --storage-option KEY=VALUE
    limits: WalkLimits = field(default_factory=WalkLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    commit_rows: int = 10_000  # commit once this many versions are waiting ...
    commit_seconds: float = 5.0  # ... or this long after the oldest waiting chunk
    # ... or once this many chunks wait: each holds its project's state changes and listings
    # until the commit (10,000 small projects walked unpaced: ~2,000 chunks in commit_seconds,
    # +55 MiB of peak RSS; issue 24). None: no bound.
    commit_chunks: int | None = 500
    # With a store that writes rows ahead of the commit (local: exporter/store/local/spill.py), waiting
    # rows cost no memory: commit at this many instead of commit_rows (a backfill then writes
    # month files large enough that its end needs no compaction rewrite). None: never ahead.
    spill_rows: int | None = BIG_FILE_ROWS
    # ... or, with events and rows written ahead, once this many events wait: each keeps its
    # columns in memory until the commit (~200 bytes for the events file, which renders them
    # right after the commit; bench/README.md figure 9).
    commit_events: int = 100_000
    compact: bool = True
    time_budget: float | None = None  # seconds: stop starting new work after this long
    max_requests: int | None = None  # stop starting new work after this many requests
    # Single-operation GETs per run across the account, oldest-checked first (issue 12); None:
    # every open operation the walk does not pass is read (an exit-0 sync is then current).
    max_gets_per_run: int | None = None
    # --skip-idle: leave projects whose listing shows no activity since their last walk, but
    # walk every project at least every `full_sweep_every` seconds (README: what it can delay).
    skip_idle: bool = False
    full_sweep_every: float = 86_400.0
    # Events of new versions (issue 22): recorded with the commit, delivered after the run.
    events: EventsConfig | None = None
    # --refresh-open-every, seconds: the longest an open operation goes without a re-read
    # (hot ones: every run; exporter/engine/schedule.py). 0: every open operation in every run, so
    # after an ok run `operations` equals the API.
    refresh_open_every: float = DEFAULT_EVERY_US / 1e6
    # Microseconds since the epoch: when things are read and what is due. The wall clock;
    # tests and benchmarks pass the simulator's to run days of cron in seconds.
    clock: Callable[[], int] = field(default=now_us, repr=False)
    # --names-max-age (seconds): a project's branches and endpoints listings are read again once
    # older than this (0: every run); also in its first walk and when an unknown id shows up.
    names_max_age: float = 86_400.0
    # Whether compaction may fix glibc's mmap threshold at 256 KiB for the rest of the process
    # (`_map_large_allocations`: no call restores the dynamic one): the command line's, whose
    # process is one run's. A notebook's process keeps its allocator (1 MiB numpy arrays each
    # mapped were ~12x slower).
    map_large_allocations: bool = False


@dataclass
class ProjectResult:
    """What one project's part of a run did (folded into `RunSummary`)."""

    walk: WalkResult
    error: str | None = None
    left: bool = False  # stopped by the budget (or the run's stop): the next run resumes it
    names_left: bool = False  # of a left one: walked to its end, only its names to read
    unknown: bool = False  # 404 for a project never seen (a mistyped --project)


@dataclass
class RunSummary:
    """What a sync did; `exit_code` is what the CLI exits with (143 for a run SIGTERM stopped:
    the CLI's to know, `interrupted` is 130 here)."""

    run_id: str
    started_at: datetime
    finished_at: datetime | None = None
    outcome: Outcome = Outcome.RUNNING
    projects_total: int = 0
    projects_ok: int = 0
    projects_failed: int = 0
    projects_deleted: int = 0
    projects_unknown: int = 0  # failed with a 404 and never seen: a mistyped --project
    requests: int = 0
    responses_429: int = 0
    retries: int = 0
    new_operations: int = 0
    changed_operations: int = 0
    versions_written: int = 0
    pages: int = 0
    gets: int = 0
    names_requests: int = 0  # branches + endpoints listings read
    open_operations: int = 0
    projects_left: int = 0  # not reached or cut short (budget, stop): the next run continues
    # Of them, walked to their end (operations all in, as `status` shows), their names left:
    # "0/8 projects; 8 left" said nothing of the walks a first budgeted run completed.
    projects_names_left: int = 0
    projects_idle: int = 0  # left for a later run by --skip-idle (no activity since last walk)
    coverage: Coverage | None = None  # account-wide currency after the run
    achieved_rps: float = 0.0  # requests / wall seconds
    configured_rps: float | None = None  # the pacing asked for (None: unpaced)
    errors: dict[str, str] = field(default_factory=dict)  # project id (or "") -> message
    error: str | None = None
    # Events the sinks took in this run, the larger of the sinks' counts (one the file and the
    # webhook both took counts once); each sink's in `events_delivered_by_sink`.
    events_delivered: int = 0
    events_pending: int | None = None  # events left in the outbox (None: no sink configured)
    events_waiting: dict[str, int] = field(default_factory=dict)  # of them, per sink
    events_delivered_by_sink: dict[str, int] = field(default_factory=dict)  # the run's sinks
    # Where each sink's events went, as the summary names it: the file's path, the webhook's
    # host (never its path, query or user info).
    events_targets: dict[str, str] = field(default_factory=dict)
    # The longest retry wait (Retry-After, backoff) given up at the time budget's end, in
    # seconds: a run ended early while throttled says so (0: none).
    wait_given_up: float = 0.0
    # Retries given up because --max-requests, which counts every attempt, no longer covered
    # them (their requests are tried again next run): a run cut so says why (0: none).
    retries_given_up: int = 0

    @property
    def exit_code(self) -> ExitCode:
        return _EXIT_CODES.get(self.outcome, ExitCode.FATAL)

    def add(self, r: ProjectResult) -> None:
        w = r.walk
        self.pages += w.pages
        self.gets += w.gets
        self.names_requests += w.names_requests
        self.new_operations += w.new
        self.changed_operations += w.changed
        if w.deleted:
            self.projects_deleted += 1
        if r.left:
            self.projects_left += 1
            self.projects_names_left += r.names_left
        elif r.error is None:
            self.projects_ok += 1
        else:
            self.projects_failed += 1
            self.projects_unknown += r.unknown
            self.errors[w.project_id] = r.error

    def count_left(self) -> None:
        """Projects not reached or cut short: every one neither done, failed nor left idle."""
        self.projects_left = max(
            0, self.projects_total - self.projects_ok - self.projects_failed - self.projects_idle
        )

    def settle(self, budget_reached: bool = False) -> None:
        """The outcome of a run whose walks all ended (unless an earlier stop set one)."""
        self.count_left()
        if self.outcome is not Outcome.RUNNING:
            return
        if not self.projects_failed and not self.errors:
            self.outcome = Outcome.BUDGET if budget_reached else Outcome.OK
        elif (
            self.projects_ok == 0
            and self.projects_total > self.projects_unknown
            and not self.new_operations + self.changed_operations
        ):
            # Nothing could be synced (exit 5); a mistyped --project alone is a project error,
            # and a project that failed after committing operations (its names listing, a page
            # deep in its backfill) synced something: partial, as with two projects.
            self.outcome = Outcome.FAILED
        else:
            self.outcome = Outcome.PARTIAL

    def line(self) -> str:
        """The one-line summary printed at the end of a run."""
        secs = (self.finished_at - self.started_at).total_seconds() if self.finished_at else 0.0
        text = (
            f"sync {self.outcome}: {self.projects_ok}/{self.projects_total} projects, "
            f"{self.new_operations} new and {self.changed_operations} changed operations, "
            f"{self.requests} requests ({self.responses_429} throttled, {self.retries} retried) "
            f"in {secs:.1f}s"
        )
        if self.projects_failed:
            text += f"; {self.projects_failed} project(s) failed"
        if self.projects_idle:
            text += f"; {self.projects_idle} idle project(s) not walked (--skip-idle)"
        if self.projects_left:
            text += f"; {self.projects_left} project(s) left for the next run"
            if self.projects_names_left:
                text += (
                    f" ({self.projects_names_left} of them walked, only their branches and "
                    "endpoints to list)"
                )
        if self.wait_given_up:
            text += (
                f"; gave up a retry's wait of {self.wait_given_up:.1f}s (Retry-After or backoff)"
                " that would end past --time-budget"
            )
        if self.retries_given_up:
            text += (
                f"; gave up {self.retries_given_up} retry(ies) that --max-requests no longer "
                "covered"
            )
        if self.configured_rps and secs >= 1:  # a rate over less than a second means nothing
            text += f"; {self.achieved_rps:.1f} req/s of {self.configured_rps:g} configured"
        if self.events_pending is not None:
            text += f"; {self._events_delivered()}"
            if self.events_pending:
                text += f", {self.events_pending} waiting for the next run"
                # Which sink: with two, "69 delivered, 69 waiting" said nothing of which.
                sinks = [f"{n} for the {sink}" for sink, n in sorted(self.events_waiting.items())]
                text += f" ({', '.join(sinks)})" if sinks else ""
        return text

    def _events_delivered(self) -> str:
        """The events the run's sinks took: with both, each one's count and where it went
        ("21 event(s) delivered (21 to the file, 0 to the webhook)" led with the larger)."""
        by_sink = self.events_delivered_by_sink
        if len(by_sink) < 2:
            return f"{self.events_delivered} event(s) delivered"
        where = self.events_targets
        return (
            f"{by_sink.get('file', 0)} event(s) appended to {where.get('file', 'the file')}, "
            f"{by_sink.get('webhook', 0)} delivered to the webhook"
            + (f" at {where['webhook']}" if "webhook" in where else "")
        )


class SyncObserver(Protocol):
    """Progress of a run, for a status line or a log (pip-audit's `AuditState`).

    Library callers pass nothing (a `NullObserver`); the CLI passes a progress display. Methods
    are called from the run's threads, so an implementation must be thread-safe.
    """

    def discovered(self, projects: int, stats: RequestStats) -> None:
        """The projects in scope are known."""

    def project_done(self, result: ProjectResult, stats: RequestStats, rate: float) -> None:
        """One project's walk ended (successfully or not)."""

    def committed(self, versions: int, files: int) -> None:
        """A batch of versions became durable."""


class NullObserver:
    """The observer of a caller that wants no progress."""

    def discovered(self, projects: int, stats: RequestStats) -> None:
        pass

    def project_done(self, result: ProjectResult, stats: RequestStats, rate: float) -> None:
        pass

    def committed(self, versions: int, files: int) -> None:
        pass


class _Committer(threading.Thread):
    """The only writer: turns queued chunks into committed Parquet files and state changes."""

    def __init__(
        self,
        dataset: Store,
        run_id: str,
        config: SyncConfig,
        observer: SyncObserver,
        stats: RequestStats | None = None,
    ):
        super().__init__(name="opsaudit-committer", daemon=True)
        self.dataset = dataset
        self.run_id = run_id
        self.stats = stats or RequestStats()  # the run's client's: recorded with each commit
        self.config = config
        self.observer = observer
        # Bounded: a fast API cannot pile up unwritten rows (flat memory).
        self.queue: queue.Queue[Chunk | None] = queue.Queue(maxsize=2)
        self.partitions: set[str] = set()
        self.versions_written = 0
        self.error: BaseException | None = None
        self._seq = 0
        self.outbox = (
            Outbox(dataset.state, config.events, dataset.versions_reader())
            if config.events
            else None
        )
        # Rows written ahead (`Store.spill`), with events too when the outbox builds their JSON
        # from the committed rows (`Store.versions_reader`): a chunk keeps what its outbox row
        # needs (`Outbox.keep`), and an events backfill makes the commits of one without.
        self.spilling = config.spill_rows is not None and (
            self.outbox is None or self.outbox.rows is not None
        )
        self.follower: Any = None  # the events file appended after each commit (FileFollower)
        if self.outbox is not None and self.outbox.config.file is not None:
            self.follower = FileFollower(
                self.outbox, self.outbox.config.file, dataset.child_handoff()
            )
        # Awaited rather than joined: a Ctrl-C in Thread.join takes a live thread for ended
        # (CPython 3.11), and the run then went on (and closed the dataset) with a commit
        # still being written.
        self.ended = threading.Event()
        self._ending = threading.Lock()
        self._at_end: list[Callable[[], None]] = []
        self._abandoned = False
        self._closing = False  # its end is queued (`close`)

    def submit(self, chunk: Chunk) -> None:
        if self.error is not None:
            raise _CommitterFailed(f"cannot commit: {self.error}") from self.error
        if chunk.ops:
            chunk.table = versions_table(
                chunk.ops,
                chunk.raws,
                chunk.created_us,
                chunk.versions,
                chunk.observed_us,
                self.run_id,
            )
            # The columns are built: a chunk that waits for its commit (up to spill_rows rows
            # when written ahead) keeps no per-row Python objects.
            chunk.ops, chunk.raws = [], []
            chunk.created_us, chunk.versions, chunk.observed_us = [], [], []
        self.queue.put(chunk)

    def close(self) -> None:
        """Commit what is queued and wait until that is done (again after a Ctrl-C there)."""
        if not self._closing:
            self.queue.put(None)
            self._closing = True
        self.ended.wait()

    def abandon(self) -> None:
        """Let it end after what is queued, without waiting (a run aborted: the queue may be
        full, and a blocking put would wait for a commit)."""
        self._abandoned = True
        with contextlib.suppress(queue.Full):
            self.queue.put_nowait(None)

    @property
    def running(self) -> bool:
        return self.ident is not None and not self.ended.is_set()

    def when_ended(self, then: Callable[[], None]) -> None:
        """`then()` now, or once the committer has ended if it is still running (a run
        aborted by a second Ctrl-C during a commit: the dataset is closed, and its lock
        released, only after that commit, and the events file's append it started)."""

        def after() -> None:
            if self.follower is not None:
                _quietly(self.follower.wait)
                self.follower.close()
            then()

        with self._ending:
            if self.running:
                self._at_end.append(after)
                return
        after()

    def run(self) -> None:
        try:
            self._run()
        finally:
            with self._ending:
                self.ended.set()
                at_end, self._at_end = self._at_end, []
            for then in at_end:
                then()

    def _run(self) -> None:
        if self.follower is not None:
            try:
                self.follower.start()
            except BaseException as exc:  # the backlog cannot be built (rows deleted)
                # The run's error: the loop still takes the walks' chunks, committing none (a
                # thread ended here left them waiting for it forever).
                log.debug("events file: %s", exc)
                self.error = exc
        waiting: list[Chunk] = []
        rows = events = 0
        oldest = 0.0
        done = False
        while not done:
            timeout = (
                None
                if not waiting
                else max(0.0, oldest + self.config.commit_seconds - time.monotonic())
            )
            try:
                item = self.queue.get(timeout=timeout)
            except queue.Empty:
                item = _TICK
            if item is None:
                done = True
            elif item is not _TICK:
                if not waiting:
                    oldest = time.monotonic()
                waiting.append(item)
                rows += item.rows
                if self.spilling and self.error is None:
                    self._spill(item)
                events += item.events.num_rows if item.events is not None else 0
            # Abandoned with the queue full (no end marker fitted): ends once it is drained.
            done = done or (self._abandoned and self.queue.empty())
            chunks = self.config.commit_chunks
            due = (
                done
                or rows >= self.commit_rows
                or events >= self.config.commit_events
                or (chunks is not None and len(waiting) >= chunks)
                or (waiting and time.monotonic() - oldest >= self.config.commit_seconds)
            )
            if waiting and due and self.error is None:
                try:
                    self._commit(waiting, last=done)
                except BaseException as exc:
                    log.debug("commit failed: %s", exc)  # the run's error reports it once
                    self.error = exc
                waiting, rows, events = [], 0, 0
        # The follower's last append may go on: the run completes it (`_Run._deliver`).

    @property
    def commit_rows(self) -> int:
        if self.spilling and self.config.spill_rows is not None:
            return self.config.spill_rows
        return self.config.commit_rows

    def _spill(self, chunk: Chunk) -> None:
        """Write the chunk's rows ahead (the commit registers them); the chunk keeps its state
        changes only. A store that cannot keeps the rows with the chunk, committed in
        commit_rows batches."""
        if chunk.table is None or not chunk.table.num_rows:
            return
        try:
            written = self.dataset.spill(chunk.table)
            if written and self.outbox is not None:
                # Before its rows leave the chunk; in the try: an error here ended the thread
                # unseen, and the walks then waited forever for it to take their chunks.
                chunk.events = self.outbox.keep(chunk.table)
        except BaseException as exc:
            log.debug("writing rows ahead failed: %s", exc)  # the run's error reports it once
            self.error = exc
            return
        if written:
            chunk.table = None
        else:
            self.spilling = False

    def _commit(self, chunks: list[Chunk], last: bool = False) -> None:
        tables = [c.table for c in chunks if c.table is not None]
        table = None
        if tables:
            table = pa.concat_tables(tables) if len(tables) > 1 else tables[0]
        self._seq += 1
        state = self.dataset.state

        outbox, follower, now = self.outbox, self.follower, now_us()
        events: list[Any] = []  # the commit's rows that make events, with their project's name
        recorded: list[Any] = [[]]  # the outbox rows of this commit
        if outbox is not None:
            for c in chunks:
                if c.table is not None:  # not written ahead
                    c.events = outbox.keep(c.table)

        def apply(con: Any) -> None:
            # A run killed after this commit says what it did up to here (it said 0 new
            # operations and 0 requests); its end writes the whole run's figures over these.
            new, changed = sum(c.new for c in chunks), sum(c.changed for c in chunks)
            state.count_progress(con, self.run_id, new, changed, self.stats)
            events.clear()
            if follower is not None:
                follower.mark(con)  # the previous commit's events, appended to the file since
            for c in chunks:
                # The chunk's listings first: its rows' events carry the names they show.
                state.apply_names(con, c)
                if outbox is not None:
                    events.extend(outbox.select(con, c.project_id, c.events))
                state.apply_chunk(con, c)
            if outbox is not None:
                # In the transaction that commits the rows: the outbox (issue 22).
                recorded[0] = outbox.record(con, events, now, self.run_id)

        done = self.dataset.commit(table, f"{self.run_id}-{self._seq:05d}", self.run_id, apply)
        if follower is not None:
            # Delivery after the commit, never before; the last commit's append goes on
            # alongside the run's end (`_Delivery`).
            follower.committed(recorded[0], alongside=last)
        self.versions_written += done.rows
        self.partitions.update(done.partitions)
        self.observer.committed(done.rows, done.files)


_TICK = Chunk("")  # wakes the committer to check its timer


class _Delivery(threading.Thread):
    """The end-of-run delivery (`_Run._deliver`), on a thread of its own where the run's end
    has something slow for it to go alongside: the views database of a local directory is
    written in a child process while the events file's last append, or the webhook, goes on
    (bench/README.md, figure 9). Where the store's state is uploaded with the run's record
    (object storage), it is awaited first. `stop` ends the webhook, its POSTs in flight cut: set
    by the run's stop (`_linked`) and by an abort (a second Ctrl-C)."""

    def __init__(self, run: _Run, committer: _Committer):
        super().__init__(name="opsaudit-deliver", daemon=True)
        self.owner, self.committer = run, committer
        self.failure: BaseException | None = None
        self.stop = threading.Event()
        # Awaited rather than joined: a Ctrl-C in Thread.join takes a live thread for ended
        # (CPython 3.11, bpo-45274's fix), and the next join returns at once.
        self.ended = threading.Event()

    def start(self) -> None:
        super().start()
        threading.Thread(target=self._linked, name="opsaudit-deliver-stop", daemon=True).start()

    def _linked(self) -> None:
        """The run's stop (Ctrl-C, SIGTERM) stops the delivery too: a POST in flight is cut
        and nothing more is sent, it waits in the outbox (it sent the whole backlog, and
        `systemctl stop` waited for it until its SIGKILL). Looked at, not waited on: an Event
        cannot wake on another's."""
        while not self.ended.wait(0.05):
            if self.owner.stop.is_set():
                self.stop.set()
                return

    def run(self) -> None:
        try:
            self.owner._deliver(self.committer, self.stop)
        except BaseException as exc:  # raised by the run (`raise_failure`)
            self.failure = exc
        finally:
            self.ended.set()

    def raise_failure(self) -> None:
        if self.failure is not None:
            raise self.failure


def _join_through_ctrl_c(
    join: Callable[[], object], stop: threading.Event | None = None
) -> KeyboardInterrupt | None:
    """`join` (the end of a thread of the run) carried to its end: a Ctrl-C meanwhile sets
    `stop` and is returned, to be raised once the thread ended (it writes the events file and
    the state: it never outlives the dataset's close, which releases the lock)."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            join()
            return interrupted
        except KeyboardInterrupt as exc:
            interrupted = exc
            if stop is not None:
                stop.set()


def _first_ctrl_c_stops(
    join: Callable[[], _T], stop: threading.Event
) -> tuple[_T, KeyboardInterrupt | None]:
    """`join`'s result, through a first Ctrl-C that reached this thread as KeyboardInterrupt (a
    library call: no handler turned it into `stop`, as the CLI's does): it stops the run as the
    CLI's first Ctrl-C does, and is returned, to be raised once the run is recorded
    `interrupted`. A Ctrl-C once `stop` is set aborts, raised at once."""
    interrupted: KeyboardInterrupt | None = None
    while True:
        try:
            return join(), interrupted
        except KeyboardInterrupt as exc:
            if stop.is_set():
                raise
            stop.set()
            interrupted = exc


def _walks_ended(futures: list[Future[None]]) -> set[Future[None]]:
    """The walks once all ended or one raised. Waited in slices: a Ctrl-C that only sets the
    flag (`_thread.interrupt_main`, a signal another thread took) is raised between them."""
    while True:
        done, pending = wait(futures, timeout=0.25, return_when=FIRST_EXCEPTION)
        if not pending or any(f.exception() is not None for f in done):
            return done


class _CommitterFailed(StorageError):
    """A walk's chunk refused because the committer already failed: a follow-on, never the
    cause (the committer's own error decides the exit code, issue 19 finding 6)."""


def sync(
    config: SyncConfig,
    observer: SyncObserver | None = None,
    stop: threading.Event | None = None,
) -> RunSummary:
    """Run one sync of `config.data_dir`; never raises for a per-project failure.

    Setting `stop` (the CLI does on SIGINT / SIGTERM) stops new requests at once, as a spent
    budget does: what was read is committed and the outcome is `interrupted`.
    An exception raised in the caller's thread meanwhile (a signal handler's: Airflow's timeout)
    stops them too: what was read is committed, the outcome is `failed`, and it is raised.

    Raises `AuthError` for a missing or malformed key, `LockHeldError`, `StorageError` or
    `ConfigError` before anything is written (`StoppedError` when `stop` is set while it waits
    for the lock: `wait_for_lock`), and `StorageError` when the dataset cannot be
    written; a key the API rejects, a failed discovery or an API down for everything is
    reported in the summary's outcome.
    """

    # Before the data directory is touched: no key, nothing created (issue 23); no API to ask
    # (ApiClient would refuse the URL only once the run was recorded).
    check_api_key(config.api_key)
    validate_base_url(config.base_url)
    config = plain_values(config)  # a notebook's numpy counts and path types, as plain ones
    check_settings(config)  # what the CLI's options refuse (a notebook's concurrency=0)
    # What only a library caller gives: limits=None raised an AttributeError once the run was
    # recorded (left `running`, the next run said `killed`).
    check_types(
        ("limits", config.limits, WalkLimits, "an exporter.WalkLimits (left out: the defaults)"),
        ("retry", config.retry, (RetryPolicy, type(None)), "an exporter.RetryPolicy or None"),
        ("events", config.events, (EventsConfig, type(None)), "an exporter.EventsConfig or None"),
    )
    arrow_without_pandas()

    dataset = open_store(
        config.data_dir, config.storage_options, lock=True, wait=config.wait_for_lock, stop=stop
    )
    run: _Run | None = None
    try:
        dataset.recover()
        run = _Run(dataset, config, observer or NullObserver(), stop)
        with _fewer_collections():
            return run.run()
    finally:
        if run is None or run.committer is None:
            dataset.close()
        else:
            run.committer.when_ended(dataset.close)


class _Run:
    """One run: discovery, the walks, the commits and the summary, in that order."""

    def __init__(
        self,
        dataset: Store,
        config: SyncConfig,
        observer: SyncObserver,
        stop: threading.Event | None = None,
    ):
        self.dataset = dataset
        self.stop = stop or threading.Event()
        self.config = config
        self.observer = observer
        self.clock = config.clock
        self.started = self.clock()
        self.schedule = RefreshSchedule(int(config.refresh_open_every * 1e6))
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ-") + uuid.uuid4().hex[:6]
        self.summary = RunSummary(run_id, datetime.now(timezone.utc))
        self.cancel = threading.Event()
        self.lock = threading.Lock()
        self.budget = Budget(config.time_budget, config.max_requests, stop=self.stop)
        self.clock_started = time.monotonic()
        self.allowed_gets: set[str] | None = None
        self.committer: _Committer | None = None
        self.interrupted: KeyboardInterrupt | None = None  # a library call's first Ctrl-C

    def run(self) -> RunSummary:
        summary, dataset, config = self.summary, self.dataset, self.config
        dataset.begin_run(summary.run_id, self.started)
        dataset.state.set_refresh_every(self.schedule.every_us)
        client = ApiClient(
            config.base_url,
            config.api_key,
            pacer=Pacer(config.max_rps, config.route_max_rps, sleep=self.stop.wait),
            retry=config.retry,
            max_connections=max(4, config.concurrency * 2),
            stop=self.stop,
        )
        client.halt = self.budget.outlasted_by  # a retry's wait never outlasts the run
        if self.budget.deadline is not None:  # nor does a request in flight, trickled
            client.cutoff = self.budget.deadline + IN_FLIGHT_GRACE
        committer = self.committer = _Committer(
            dataset, summary.run_id, config, self.observer, client.stats
        )
        failure: BaseException | None = None
        delivery: _Delivery | None = None
        try:
            self._sync(client, committer)
            if config.events is not None and config.events.sinks:
                delivery = self._start_delivery(committer)
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self.cancel.set()
            if isinstance(failure, KeyboardInterrupt) and not self.stop.is_set():
                # A library call's first Ctrl-C past the walks (the last commit, compaction):
                # as the CLI's first, what was read is committed, the run `interrupted`.
                self.stop.set()
                self.interrupted = failure
            # Only Ctrl-C twice aborts: SystemExit (a script's SIGTERM handler calling sys.exit)
            # or another BaseException stops as an exception does, what was read committed.
            aborted = isinstance(failure, KeyboardInterrupt)
            aborted = aborted and failure is not self.interrupted
            if committer.running and not aborted:
                committer.close()
            if committer.running:
                # Aborted (a second Ctrl-C) during a commit: left as a kill leaves it, the
                # commit atomic and the run recorded by the next one's recovery; the dataset
                # is closed once the commit ended (`sync`), so no other run starts meanwhile.
                committer.abandon()
                client.close()
            else:
                self._end(client, committer, delivery, failure)
        if self.interrupted is not None:
            raise self.interrupted  # recorded `interrupted`, its reads committed
        return summary

    def _end(
        self,
        client: ApiClient,
        committer: _Committer,
        delivery: _Delivery | None,
        failure: BaseException | None,
    ) -> None:
        """The run's end once its commits are done: the figures, the record, the delivery."""
        summary = self.summary
        summary.versions_written = committer.versions_written
        summary.requests = client.stats.requests
        summary.responses_429 = client.stats.responses_429
        summary.retries = client.stats.retries
        skewed = clock_skew_problem(client.clock_skew)  # known from the run's first answer
        if skewed is not None:
            log.warning("%s; set the clock (NTP)", skewed)
        client.close()
        if summary.outcome is Outcome.RUNNING and isinstance(failure, KeyboardInterrupt):
            # Ctrl-C a second time: interrupted, as after the first (it said failed, with
            # the error `KeyboardInterrupt`); what was committed stays.
            twice = failure is not self.interrupted
            summary.outcome = Outcome.INTERRUPTED
            summary.error = "interrupted (Ctrl-C twice)" if twice else None
        if summary.outcome is Outcome.RUNNING:
            summary.outcome = Outcome.FAILED
            if failure is not None and summary.error is None:
                summary.error = redact(str(failure) or type(failure).__name__)
        summary.finished_at = datetime.now(timezone.utc)
        finish_error: BaseException | None = None
        try:
            # After a storage failure only the run's record is attempted: the exports
            # would fail the same way and bury the message under more of their own.
            self._finish(summary, exports=not isinstance(failure, StorageError))
        except Exception as exc:
            # Never mask the error that ended the run with one from the clean-up.
            if failure is None:
                finish_error = exc
            else:
                log.error("could not record the end of run %s: %s", summary.run_id, exc)
        except BaseException as exc:  # Ctrl-C again: raised once the delivery ended
            finish_error = exc
        self._settle(delivery, committer, failure or finish_error)
        if finish_error is not None:
            raise finish_error

    def _start_delivery(self, committer: _Committer) -> _Delivery:
        """The end-of-run delivery: alongside the run's record and the views database where
        there is one (a local directory), else in line, before the run is recorded."""
        delivery = _Delivery(self, committer)
        delivery.start()
        if self.dataset.views_dataset() is None:  # in line: awaited before the run's record
            interrupted = self._await_delivery(delivery)
            if interrupted is not None:
                raise interrupted
            delivery.raise_failure()
            self._stopped_while_delivering()
        return delivery

    def _await_delivery(self, delivery: _Delivery) -> KeyboardInterrupt | None:
        return _join_through_ctrl_c(delivery.ended.wait, delivery.stop)

    def _stopped_while_delivering(self) -> bool:
        """A run stopped while delivering, events left waiting: `interrupted` (exit 130, 143
        for SIGTERM), as a run stopped before; True when that changed its outcome."""
        summary = self.summary
        if not (self.stop.is_set() and summary.events_pending):
            return False
        if summary.outcome not in (Outcome.OK, Outcome.BUDGET):
            return False
        summary.outcome = Outcome.INTERRUPTED
        return True

    def _settle(
        self, delivery: _Delivery | None, committer: _Committer, failure: BaseException | None
    ) -> None:
        """Wait for the delivery that went on alongside the run's record, and for the events
        file's last append (a failed run's, or one an interrupted delivery left), even through
        a Ctrl-C (an abort stops the webhook at its next attempt; raised once they ended): they
        write the events file and the state, which the dataset's close hands to the next run.
        The delivery's failure (the state cannot be written, the committed rows cannot be read)
        fails a run that had none: the run is recorded again as failed, and the error raised."""
        interrupted = None
        if delivery is not None:  # an abort's first Ctrl-C stopped it (`_Delivery._linked`)
            interrupted = self._await_delivery(delivery)
        if committer.follower is not None:
            # Its failure is the run's own error, or the delivery's.
            ended = _join_through_ctrl_c(lambda: _quietly(committer.follower.wait))
            interrupted = interrupted or ended
        if interrupted is not None:
            raise interrupted
        if delivery is None or delivery.failure is None:
            if delivery is not None and self._stopped_while_delivering():
                try:
                    self._finish(self.summary)  # it was recorded `ok` alongside
                except Exception as exc:
                    log.error("could not record the end of run %s: %s", self.summary.run_id, exc)
            return
        if failure is not None:  # the run's own error is raised; the delivery's is said here
            log.error(
                "delivering the events of run %s failed too: %s",
                self.summary.run_id,
                redact(str(delivery.failure)),
            )
            return
        self.summary.outcome = Outcome.FAILED
        self.summary.error = redact(str(delivery.failure) or type(delivery.failure).__name__)
        try:
            self._finish(self.summary)  # the exported sync_runs said ok: they are rewritten
        except Exception as exc:  # never masks the delivery's error
            log.error("could not record the end of run %s: %s", self.summary.run_id, exc)
        delivery.raise_failure()

    def _sync(self, client: ApiClient, committer: _Committer) -> None:
        summary, config = self.summary, self.config
        state = self.dataset.state
        remembered = state.get_meta("projects_page_limit")
        # The listing's attempts are taken once it ends (`spend`); until then, a retry of it
        # must fit besides those the client sent.
        client.charge_retry = lambda: self.budget.take_retry(client.stats.requests)
        try:
            found = discover(
                client,
                project_ids=config.project_ids,
                org_ids=config.org_ids,
                on_page=self._listed,
                page_limit=int(remembered) if remembered else PROJECTS_PAGE,
            )
        except AuthError as exc:
            summary.outcome, summary.error = Outcome.AUTH_FAILED, redact(str(exc))
            return
        except ApiError as exc:
            summary.outcome, summary.error = Outcome.FAILED, redact(f"discovery failed: {exc}")
            if isinstance(exc, NotFoundError) and not config.org_ids:
                # The API answers its listings for any key (401/403 otherwise): a 404 there
                # is another server, or its root without the API's path (an --org-id of no
                # organization is a 404 of its own).
                summary.error += (
                    f"; is --base-url ({config.base_url}) the management API's, ending in /api/v2?"
                )
            return
        except KeyboardInterrupt as exc:  # a library call's first Ctrl-C (_first_ctrl_c_stops)
            if self.stop.is_set():
                raise
            self.stop.set()
            self.interrupted = exc
            summary.outcome, summary.error = Outcome.INTERRUPTED, "interrupted while listing"
            return
        except InterruptedError:
            if self.stop.is_set():
                summary.outcome, summary.error = Outcome.INTERRUPTED, "interrupted while listing"
            else:  # a retry's wait would have passed --time-budget (exit 0 as any budget's)
                summary.outcome = Outcome.BUDGET
                summary.error = "the time budget ended while listing the projects"
                if self.budget.retries_given_up:  # or --max-requests no longer covered it
                    summary.error = (
                        f"--max-requests {config.max_requests} ran out retrying the projects "
                        "listing"
                    )
            return
        if str(found.page_limit) != remembered and not found.explicit:
            state.set_meta("projects_page_limit", str(found.page_limit))
        state.add_known(found.ids, self.started)
        state.mark_vanished(found.ids, found.complete_scopes, self.started)
        if found.whole_account:
            for pid in state.forget_never_read(found.ids):
                log.warning(
                    "project %s forgotten: no listing of what the key sees shows it, and "
                    "nothing was ever read from it (a mistyped --project)",
                    pid,
                )
        if found.errors:  # keyed "" (no project): every listing that failed, in one entry
            summary.errors[""] = "; ".join(found.errors)
        # Every attempt of the listing, retries included: the run's total stays within the cap.
        self.budget.spend(client.stats.requests)
        client.charge_retry = self.budget.take_retry
        bound = config.max_requests
        # The least that works is judged on the listing's requests, not their retries (a
        # retried page is one request of it): a 503 must not name another least budget.
        if bound is not None and bound - found.listing_requests < NAMES_REQUESTS and found.ids:
            # Every run would list, walk nothing and exit 0 `budget`, for ever (finding 10); or,
            # with one request left, walk but never read a project's names: they take two at
            # once (`Budget.reserve`), read first in a later run (`ProjectWalk.run`).
            raise ConfigError(
                f"--max-requests {config.max_requests} does not cover listing the projects "
                f"({found.listing_requests} requests) and then a project's branches and endpoints "
                f"({NAMES_REQUESTS}): the trail would never be complete; use "
                f"--max-requests {found.listing_requests + NAMES_REQUESTS} or more (more: faster "
                "coverage)"
            )
        # Stalest first: consecutive budgeted runs cover every project (issue 12).
        pids = state.stalest_first(found.ids)
        if config.skip_idle:
            idle = state.idle_projects(self.started, int(config.full_sweep_every * 1e6))
            state.found_idle(idle, self.started)
            pids = [p for p in pids if p not in idle]
        if config.max_gets_per_run is not None:
            self.allowed_gets = state.refresh_allowance(
                config.max_gets_per_run, lambda o: self.schedule.due(o, self.started)
            )
        self.load_checkpoint = state.checkpoints()
        backfill = config.events is not None and config.events.backfill
        if committer.follower is not None and backfill and state.any_unwalked(pids):
            committer.follower.prepare()  # an events backfill: its appender started now
        summary.projects_total = len(found.ids)
        summary.projects_idle = len(found.ids) - len(pids)
        self.observer.discovered(len(pids), client.stats)
        committer.start()
        with ThreadPoolExecutor(
            max(1, config.concurrency), thread_name_prefix="opsaudit-walk"
        ) as pool:
            # A bounded request budget is claimed in the order the walks start (stalest first).
            bounded = self.budget.requests_left is not None
            order = turns(len(pids)) if bounded else [None] * len(pids)
            futures = [
                pool.submit(self._walk_one, client, committer, pid, turn)
                for pid, turn in zip(pids, order, strict=True)
            ]
            try:
                done, self.interrupted = _first_ctrl_c_stops(
                    lambda: _walks_ended(futures), self.stop
                )
            except BaseException as exc:
                # Raised in this thread from outside (Airflow's execution_timeout and SIGTERM
                # handlers raise an Exception): the pool's exit waited for every walk to its
                # end. The walks stop as for a stop; `run` commits what was read and records
                # the run `failed` (no Ctrl-C: not `interrupted`), then the exception is raised.
                self.stop.set()
                self.cancel.set()
                if not isinstance(exc, KeyboardInterrupt):  # Ctrl-C twice: `_end` says so
                    summary.error = redact(f"stopped by {type(exc).__name__}: {exc}")
                raise
            if any(f.exception() is not None for f in done):
                # An unexpected error in one worker stops the others (issue 9, finding 15).
                self.cancel.set()
                for f in futures:
                    f.cancel()
            failures = [f.exception() for f in futures if not f.cancelled()]
        committer.close()
        # The first cause decides the exit code: a worker's refused chunk is a follow-on of the
        # committer's error (a lost lease is 4, not the follow-on's 6).
        worker_error = next(
            (e for e in failures if e is not None and not isinstance(e, _CommitterFailed)), None
        )
        if worker_error is not None:
            raise worker_error
        if isinstance(committer.error, OpsauditError):
            raise committer.error  # its own exit code (a lost lease is 4, a full disk 6)
        if committer.error is not None:
            raise StorageError(
                f"writing the dataset failed: {committer.error}"
            ) from committer.error
        if self.stop.is_set() and summary.outcome is Outcome.RUNNING:
            summary.outcome = Outcome.INTERRUPTED  # what was read is committed; no compaction
        if summary.outcome is not Outcome.RUNNING:
            return  # stopped early (revoked key, API down, a signal): no compaction
        _release_free_memory()
        if config.compact and committer.partitions:
            if config.map_large_allocations:
                _map_large_allocations()
            self.dataset.compact(committer.partitions)
            _release_free_memory()
        summary.settle(self.budget.reached or self.budget.fell_short)

    def _deliver(self, committer: _Committer, stop: threading.Event | None = None) -> None:
        """After the commits: hand the outbox to the sinks (whatever the run's outcome); the
        events file has, as a rule, taken each commit's events already (`FileFollower`), but
        for its last append, which may still be under way."""
        events = self.config.events
        if events is None or not events.sinks:
            return
        if committer.follower is not None:
            committer.follower.finish()
        deadline = None
        if self.budget.deadline is not None:
            # The webhook starts nothing past the budget, but gets a while in every run: a
            # run that spent its budget walking still moves the backlog.
            deadline = max(self.budget.deadline, time.monotonic()) + IN_FLIGHT_GRACE
        done = deliver(self.dataset.state, events, self.dataset.versions_reader(), stop, deadline)
        by_sink = dict(done.delivered)
        if committer.follower is not None:
            by_sink["file"] = by_sink.get("file", 0) + committer.follower.delivered
        # Events, as `events_pending` counts them: one sent to the file and the webhook is one
        # (the sum said 10 delivered for 5 events).
        self.summary.events_delivered = max(by_sink.values(), default=0)
        self.summary.events_delivered_by_sink = by_sink
        if events.file is not None:
            self.summary.events_targets["file"] = str(events.file)
        if events.webhook_url:
            self.summary.events_targets["webhook"] = safe_host(events.webhook_url)
        self.summary.events_pending = done.pending  # why a sink stopped: logged by deliver
        self.summary.events_waiting = done.waiting

    def _listed(self, projects: list[dict[str, Any]], scope: str) -> None:
        """One page of the listing: recorded, unless the run was told to stop."""
        if self.stop.is_set():
            raise InterruptedError("interrupted")
        self.dataset.state.upsert_projects(projects, scope, self.started)

    def _walk_one(
        self, client: ApiClient, committer: _Committer, pid: str, turn: Turn | None = None
    ) -> None:
        try:
            self._walk(client, committer, pid, turn)
        finally:
            if turn is not None:
                turn.done()  # ended without a claim: the next walk claims without it

    def _walk(self, client: ApiClient, committer: _Committer, pid: str, turn: Turn | None) -> None:
        if self.cancel.is_set():
            return
        walk = ProjectWalk(
            client,
            self.load_checkpoint(pid),
            committer.submit,
            self.config.limits,
            self.cancel,
            self.budget,
            self.allowed_gets,
            self.schedule,
            self.clock,
            names_max_age_us=int(self.config.names_max_age * 1_000_000),
            turn=turn,
        )
        error: str | None = None
        unknown = False
        try:
            walk.run()
        except AuthError as exc:
            self._stop(Outcome.AUTH_FAILED, str(exc))
            return
        except ApiUnavailableError as exc:
            self._stop(Outcome.FAILED, str(exc))
            return
        except InterruptedError:
            # Stopped (budget or cancel): neither ok nor failed; what it read is committed.
            with self.lock:
                self.summary.add(ProjectResult(walk.result, left=True))
            return
        except _CommitterFailed:
            raise  # the committer's error, reported once by the run: not this project's
        except OpsauditError as exc:
            error = redact(str(exc))
            unknown = isinstance(exc, UnknownProjectError)
            log.warning("project %s failed: %s", pid, error)
            # Through the committer, after the chunks already queued (finding 8).
            committer.submit(Chunk(pid, error=error))
        # Names the budget could not cover: the operations are in, the project is not done.
        left = error is None and walk.result.names_left
        result = ProjectResult(walk.result, error, left=left, names_left=left, unknown=unknown)
        with self.lock:
            self.summary.add(result)
        self.observer.project_done(result, client.stats, client.pacer.current_rps)

    def _stop(self, outcome: Outcome, message: str) -> None:
        """End the whole run early: the other workers stop at their next request."""
        self.cancel.set()
        with self.lock:
            if self.summary.outcome is Outcome.RUNNING:
                self.summary.outcome, self.summary.error = outcome, message

    def _finish(self, s: RunSummary, exports: bool = True) -> None:
        state = self.dataset.state
        s.open_operations = state.open_count()
        s.count_left()
        now = self.clock()
        s.coverage = coverage = state.coverage(now)
        s.achieved_rps = s.requests / max(time.monotonic() - self.clock_started, 1e-6)
        s.configured_rps = self.config.max_rps or None
        s.wait_given_up = self.budget.wait_given_up
        s.retries_given_up = self.budget.retries_given_up
        errors = "; ".join(f"{k or 'discovery'}: {v}" for k, v in sorted(s.errors.items())[:20])
        state.finish_run(
            s.run_id,
            self.clock(),
            outcome=s.outcome.value,
            projects_total=s.projects_total,
            projects_ok=s.projects_ok,
            projects_failed=s.projects_failed,
            requests=s.requests,
            responses_429=s.responses_429,
            retries=s.retries,
            new_operations=s.new_operations,
            changed_operations=s.changed_operations,
            versions_written=s.versions_written,
            error=redact(s.error or errors) or None,
            projects_left=s.projects_left,
            coverage_hour=coverage.share_hour,
            coverage_day=coverage.share_day,
            oldest_lag_us=coverage.oldest_lag_us,
            open_unchecked_day=coverage.open_unchecked_day,
            achieved_rps=round(s.achieved_rps, 3),
            configured_rps=s.configured_rps,
        )
        if not exports:
            return
        publish(self.dataset)


def _quietly(call: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):
        call()


def _release_free_memory() -> None:
    """Hand memory freed by the walk back to the OS before the next phase (glibc only).

    The walk churns through millions of short-lived objects; glibc keeps the freed heap, so
    compaction and the views refresh would stack their peak on top of it.
    """
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to trim
        ctypes.CDLL("libc.so.6").malloc_trim(0)


# The young generation's threshold of the cyclic GC during a run (Python's default: 700).
GC_YOUNG_THRESHOLD = 50_000
_gc_lock = threading.Lock()
_gc_runs: list[tuple[int, int, int]] = []  # the thresholds found by the runs in progress


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """Collect the young generation every GC_YOUNG_THRESHOLD container allocations instead of
    every 700, for the run; the process's thresholds are restored after the last run in it ends.

    A chunk's columns come from its 2,000 operations as tuples (`engine.records`); alive all at
    once, a collection in their midst moved them to the old generations, whose collections then
    traversed every object of the process: ~25 % of building the columns (bench/cpu_profile.py).
    The run's objects hold no cycles of note (the operations are untracked structs), so collecting
    less often keeps no more memory.
    """
    with _gc_lock:
        found = gc.get_threshold()
        _gc_runs.append(found)
        if len(_gc_runs) == 1:
            young, *older = found
            gc.set_threshold(max(young, GC_YOUNG_THRESHOLD), *older)
    try:
        yield
    finally:
        with _gc_lock:
            found = _gc_runs.pop()
            if not _gc_runs:
                gc.set_threshold(*found)


# glibc's mallopt parameter: allocations from this size up get pages of their own.
_M_MMAP_THRESHOLD = -3


def _map_large_allocations() -> None:
    """From here on, allocations of 256 KiB and more are mapped pages of their own, returned to
    the OS when freed, for the rest of the process (glibc only): for a process that is one
    run's only (`SyncConfig.map_large_allocations`, the command line's).

    Compaction merges tens of MB of Arrow buffers of ever-changing sizes (the summary record's
    months); glibc's default threshold rises with the sizes it sees, puts them on the heap, and
    the heap keeps the freed pieces: a 5.5M-operation backfill peaked at 168 MiB, 157 with this
    (bench/sync_bench.py rss; PRODUCT.md: 160). Not for the walk: its many mid-sized buffers
    would each cost a mapping (~20-30 % more CPU measured in issue 24's second pass).
    """
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing to set
        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, 256 * 1024)


__all__ = [
    "NullObserver",
    "Outcome",
    "ProjectResult",
    "RunSummary",
    "SyncConfig",
    "SyncObserver",
    "sync",
]
