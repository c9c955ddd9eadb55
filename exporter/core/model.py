"""The sync's model: what a walk hands to storage (`Chunk`), what the state tracks of an
operation that may still change (`OpenOp`), how a run ended (`Outcome`), the rows of `projects`
and `sync_runs` as the state hands them out (`ProjectRow`, `RunRow`), and the API it reads by
default (`DEFAULT_BASE_URL`).

A leaf module (of the exporter's own it names only `core.names.Listings`, for type checkers): the
walk builds these, the state and the stores take them, and status, check and metrics read the
outcomes. Defined here, none of those has to import another to name them (issue 20: `store.state`
imported `engine.walk` for `Chunk`, closing a cycle).
"""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa

    from exporter.core.names import Listings
    from exporter.core.operation import Operation

# The management API's root unless --base-url / $OPSAUDIT_BASE_URL / SyncConfig.base_url say.
DEFAULT_BASE_URL = "https://console.neon.tech/api/v2/"
# A project's names: the branches listing (one page, mostly) and the endpoints listing. With one
# page of the projects listing, the fewest requests a run can do its work with (--max-requests).
NAMES_REQUESTS = 2

# An operation in one of these statuses never changes again (PRODUCT.md).
TERMINAL_STATUSES = frozenset({"finished", "cancelled", "skipped"})

# What platform-api.md documents (and `error`, which the console shows and the API sends): a
# value a user names (--fail-on, --events-filter) that is neither one of these nor in the data
# is most likely a typo. Enums grow: an undocumented value is warned about or checked against
# the data, never refused outright.
DOCUMENTED_ACTIONS = (
    "apply_config",
    "apply_storage_config",
    "check_availability",
    "create_branch",
    "create_timeline",
    "delete_tenant",
    "start_compute",
    "suspend_compute",
    "tenant_attach",
    "tenant_detach",
    "tenant_reattach",
    "timeline_archive",
    "timeline_unarchive",
)
DOCUMENTED_STATUSES = (
    "scheduling",
    "running",
    "finished",
    "failed",
    "error",
    "cancelling",
    "cancelled",
    "skipped",
)


class Outcome(str, enum.Enum):
    """How a run ended (`sync_runs.outcome`; README, exit codes). In the order the metrics
    list them (`opsaudit_last_run_outcome`): finished ones first, by how well they went."""

    OK = "ok"  # every project in scope is complete (exit 0)
    PARTIAL = "partial"  # some projects (or a listing) failed; the rest committed (exit 1)
    BUDGET = "budget"  # --time-budget / --max-requests reached: what was read is committed,
    # the rest waits for the next run, stalest first (exit 0: not a failure)
    INTERRUPTED = "interrupted"  # Ctrl-C / SIGTERM: stopped like a budget, what was read is
    # committed (the CLI exits 130 for SIGINT, 143 for SIGTERM)
    FAILED = "failed"  # nothing could be synced, or the run stopped early (exit 5)
    AUTH_FAILED = "auth_failed"  # the key was rejected or revoked (exit 3)
    KILLED = "killed"  # the process died mid-run; set by the next run's recovery
    RUNNING = "running"  # in progress (or the process is still running)

    def __str__(self) -> str:
        return self.value


@dataclass
class OpenOp:
    """An operation last seen in a non-terminal status: re-read until terminal."""

    id: str
    project_id: str
    created_us: int
    status: str | None
    fingerprint: bytes
    version: int
    checked_us: int
    misses: int = 0  # consecutive 404s on its GET: a transient 404 must not drop it
    changed_us: int | None = None  # when it last changed (the refresh schedule); None: unknown
    retry_us: int | None = None  # its retry_at: due once that passes

    @property
    def is_open(self) -> bool:
        """False for a finished operation kept while it settles (it may change in place)."""
        return self.status not in TERMINAL_STATUSES


@dataclass
class Chunk:
    """Rows and state changes of one project, committed together by storage, in order."""

    project_id: str
    ops: list[Operation] = field(default_factory=list)  # decoded in C (`api.client`), no dicts
    raws: list[Any] = field(default_factory=list)  # each op's JSON text
    created_us: list[int] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    observed_us: list[int] = field(default_factory=list)
    open_upserts: dict[str, OpenOp] = field(default_factory=dict)
    open_deletes: set[str] = field(default_factory=set)
    # Walk in progress (None: leave as is): (top_us, top_ids, resume cursor, tail ids).
    progress: tuple[int | None, frozenset[str], str | None, frozenset[str]] | None = None
    # Walk completed: the new (checkpoint_us, boundary_ids), and progress is cleared.
    completed: tuple[int | None, frozenset[str]] | None = None
    completed_us: int = 0
    walked_from_us: int | None = None  # when the completed walk read its first page (None: as is)
    error: str | None = None  # the project failed: its last_error
    deleted_us: int | None = None  # the API answered 404 for the project
    names_due: bool = False  # these rows name a branch/endpoint id not known yet
    names: Listings | None = None  # the project's branches and endpoints, just read
    unlisted: set[str] = field(default_factory=set)  # ids met after `names` that it lacked
    new: int = 0
    changed: int = 0
    table: pa.Table | None = None  # `ops` as Arrow, built by the worker before queueing
    # What the events outbox needs of `table` at commit (`Outbox.keep`), kept by the committer
    # when it writes `table` ahead of the commit.
    events: pa.Table | None = None

    @property
    def rows(self) -> int:
        return self.table.num_rows if self.table is not None else len(self.ops)

    @property
    def empty(self) -> bool:
        return not (
            self.rows
            or self.open_upserts
            or self.open_deletes
            or self.progress is not None
            or self.completed is not None
            or self.error is not None
            or self.deleted_us is not None
            or self.names_due
            or self.unlisted
            or self.names is not None
        )


# The rows of `projects` and `sync_runs` as they cross modules (`StateDB.projects_rows()` /
# `runs_rows()` -> status, check, metrics, doctor, the exports): named by the columns of
# `core.tables.PROJECTS_SCHEMA` / `SYNC_RUNS_SCHEMA`, in their order (tests/sync/test_state.py
# holds them equal), times (`*_at`) in microseconds since the epoch. Here and not beside the
# schemas: those import pyarrow, which `opsaudit status` and `check` never load.
class ProjectRow(NamedTuple):
    """One `projects` row, times in microseconds."""

    id: str
    name: str | None
    region_id: str | None
    pg_version: int | None
    platform_id: str | None
    provisioner: str | None
    org_id: str | None
    owner_id: str | None
    created_at: int | None
    updated_at: int | None
    raw: str | None
    first_seen_at: int | None
    last_seen_at: int | None
    deleted_at: int | None  # None: still listed
    last_synced_at: int | None  # the last completed walk
    # When its trail was last known complete: that walk, or a later listing showing it idle
    # (`--skip-idle` left it): what freshness is judged by (`check`, status, metrics, report).
    current_at: int | None
    checkpoint_at: int | None
    last_error: str | None
    open_operations: int


# Runs that stopped early by design (a budget, a signal): consecutive ones cover the projects
# in turn, stalest first.
STOPPED_OUTCOMES = (Outcome.BUDGET, Outcome.INTERRUPTED)

Instant = TypeVar("Instant", int, dt.datetime)


def last_current(
    finished: Sequence[tuple[str, Instant, Instant]],
    projects: Sequence[tuple[Instant | None, Instant | None]],
) -> Instant | None:
    """When the trail was last known current, from the finished runs (outcome, when it started
    and when it finished, oldest first) and each live project's `current_at` (its last completed
    walk, or a later listing that showed it idle) and `first_seen_at`; None: never. What
    `check`, the metrics and the report's freshness all say.

    A run with outcome ok finished with every project in its scope complete; it made the whole
    trail current only if its scope was the whole trail: every live project current since the
    run started, but those first seen after it (a `sync --project X` exits 0 while the others
    are stale: it cleared `stale_sync` and both alerts). After budgeted or interrupted runs, the
    trail is current as of the oldest project's `current_at`, once every project has one (issue
    19, finding 5: budgeted runs were never a success, `stale_sync` for ever), also when partial,
    failed or scoped runs came after them. A partial or failed run adds nothing itself: a
    failing listing may hide projects the state never saw."""
    currents = [c for c, _ in projects if c is not None]
    oldest = min(currents) if len(currents) == len(projects) and currents else None

    def whole(started: Instant, ended: Instant) -> bool:
        if oldest is not None and oldest >= started:
            return True  # the usual case, at no cost per project
        return all(
            (c is not None and c >= started) or (seen is not None and seen > ended)
            for c, seen in projects
        )

    # One pass, newest first, to the newest ok run over the whole trail. Of the runs that
    # neither failed nor were scoped, the newest decides: when it stopped on purpose, the trail
    # is current as of `oldest`, capped at that run's end, which a later run's walks after a
    # failed listing do not move (a partial or failed run, or a `sync --project X`, after
    # budgeted ones read "no sync has succeeded yet" at once, the last-success metric gone).
    successes = []
    decided = False  # a newer run that stopped on purpose has decided
    for outcome, started, ended in reversed(finished):
        if outcome in STOPPED_OUTCOMES:
            if not decided and oldest is not None:
                successes.append(min(oldest, ended))
            decided = True
        elif outcome == Outcome.OK and whole(started, ended):
            successes.append(ended)
            break
    return max(successes, default=None)


class RunRow(NamedTuple):
    """One `sync_runs` row, times in microseconds."""

    run_id: str
    started_at: int
    finished_at: int | None  # None: still running, or killed
    outcome: str
    projects_total: int | None
    projects_ok: int | None
    projects_failed: int | None
    requests: int | None
    responses_429: int | None
    retries: int | None
    new_operations: int | None
    changed_operations: int | None
    versions_written: int | None
    error: str | None
    projects_left: int | None
    coverage_hour: float | None
    coverage_day: float | None
    oldest_lag_seconds: float | None
    open_unchecked_day: int | None
    achieved_rps: float | None
    configured_rps: float | None


__all__ = [
    "DEFAULT_BASE_URL",
    "DOCUMENTED_ACTIONS",
    "DOCUMENTED_STATUSES",
    "STOPPED_OUTCOMES",
    "TERMINAL_STATUSES",
    "Chunk",
    "OpenOp",
    "Outcome",
    "ProjectRow",
    "RunRow",
    "last_current",
]
