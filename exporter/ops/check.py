"""`check`: does the audit trail need attention? Findings from the state and the data.

The platform deletes operations after about six months (PRODUCT.md, "Retention"): a sync that
silently stops working becomes history lost for good. `run_check` reads the state database (the
source of truth for runs, checkpoints and open operations) and the Parquet data (through the
views) and returns one `Finding` per problem; the CLI prints one line each and exits with
`ExitCode.ATTENTION` when there is any. Nothing here writes to the data directory.

Thresholds on the data (`--fail-on`) are written in a small language, parsed strictly:

    failure_rate[(ACTION)] > 5% over 24h     share of operations created in the window that
                                             failed at least once (failures_count > 0)
    stuck[(ACTION)] > 0 [over 24h]           operations not terminal `stuck_after` after
                                             their creation (the `stuck_operations` view);
                                             with `over`, only those created in the window (an
                                             old stuck operation ages out, so the alert clears)

An ACTION must be one the API documents or one in the data: a misspelt action is a usage error,
not a threshold that never fires.

`>` and `>=` compare; durations are a number and one of s, m, h, d, w.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from exporter.analytics.format import branch_failure_line, format_duration, jsonable
from exporter.core.errors import ConfigError, check_type, check_types, escape_controls
from exporter.core.layout import LOCK_FILE, STATE_FILE, has_state
from exporter.core.model import (
    DOCUMENTED_ACTIONS,
    STOPPED_OUTCOMES,
    Outcome,
    ProjectRow,
    RunRow,
    last_current,
)
from exporter.core.timeutil import parse_duration
from exporter.store.readers import reading
from exporter.store.state import TERMINAL_STATUSES, StateDB, no_reread_ages, settled_runs

__all__ = [
    "DEFAULT_MAX_AGE",
    "DEFAULT_REREAD_MAX_AGE",
    "DEFAULT_STUCK_AFTER",
    "FINDING_KINDS",
    "RETENTION",
    "CheckReport",
    "Finding",
    "FindingKind",
    "Threshold",
    "last_success_us",
    "parse_duration",
    "parse_threshold",
    "run_check",
]

UTC = dt.timezone.utc

# "Operations older than 6 months may be deleted from our systems" (PRODUCT.md): 182 days is
# the shortest six calendar months can be, so the check warns before the platform deletes.
RETENTION = dt.timedelta(days=182)
DEFAULT_MAX_AGE = dt.timedelta(hours=2)
# Open operations are re-read on a schedule, at least every `--refresh-open-every` (the bound
# the last sync recorded, exporter/engine/schedule.py); with cron every few minutes a re-read comes
# at most one run after it, so the bound plus this grace means the schedule is not keeping up.
REREAD_GRACE = dt.timedelta(hours=1)
# When no bound is recorded, or it is 0 (every run re-reads everything): a day.
DEFAULT_REREAD_MAX_AGE = dt.timedelta(hours=24)
# The same bound as the `stuck_operations` view (sql/40_stuck.sql).
DEFAULT_STUCK_AFTER = dt.timedelta(hours=1)
# A first backfill that has not completed while the history it has reached is this close to
# the retention horizon: what it has not read yet is about to be deleted (or already is).
COVERAGE_MARGIN = dt.timedelta(days=14)


# The threshold language (module docstring). One regular expression per form, matched in
# full: anything else is refused with the forms spelled out.
_ACTION = r"(?:\(\s*(?P<action>[A-Za-z0-9_.:-]+)\s*\))?"
_FAILURE_RATE = re.compile(
    r"^\s*failure_rate\s*" + _ACTION + r"\s*(?P<op>>=|>)\s*(?P<value>\d+(?:\.\d+)?)\s*%"
    r"\s+over\s+(?P<window>\d+\s*[smhdw])\s*$"
)
_STUCK = re.compile(
    r"^\s*stuck\s*" + _ACTION + r"\s*(?P<op>>=|>)\s*(?P<value>\d+)"
    r"(?:\s+over\s+(?P<window>\d+\s*[smhdw]))?\s*$"
)
THRESHOLD_FORMS = (
    "'failure_rate(ACTION) > 5% over 24h', 'stuck > 0' or 'stuck(ACTION) > 0 over 24h'"
)


@dataclass(frozen=True)
class Threshold:
    """One `--fail-on` expression, parsed."""

    text: str  # as written, for messages
    metric: str  # "failure_rate" | "stuck"
    action: str | None  # None: every action
    op: str  # ">" | ">="
    value: float  # a fraction (0.05) for failure_rate, a count for stuck
    # Operations created in the last window (failure_rate: always; stuck: when `over` is given).
    window: dt.timedelta | None = None

    def crossed(self, measured: float) -> bool:
        return measured > self.value if self.op == ">" else measured >= self.value


def parse_threshold(text: str) -> Threshold:
    """Parse a `--fail-on` expression (module docstring); `ConfigError` if it is not one."""
    m = _FAILURE_RATE.match(text)
    if m:
        return Threshold(
            text=text.strip(),
            metric="failure_rate",
            action=m["action"],
            op=m["op"],
            value=float(m["value"]) / 100,
            window=_window(text, m["window"]),
        )
    m = _STUCK.match(text)
    if m:
        return Threshold(
            text=text.strip(),
            metric="stuck",
            action=m["action"],
            op=m["op"],
            value=int(m["value"]),
            window=_window(text, m["window"]) if m["window"] else None,
        )
    raise ConfigError(f"--fail-on {text!r} is not a threshold: write {THRESHOLD_FORMS}")


def _window(text: str, window: str) -> dt.timedelta:
    """The `over` part of a threshold; no time at all is refused, as `--max-age 0s` is: no
    operation is created in an empty window, so such a threshold could never fire."""
    duration = parse_duration(window)
    if not duration:
        raise ConfigError(
            f"--fail-on {text.strip()!r}: the window {window!r} is no time at all, so it could "
            "never fire: give a duration above 0 (24h)"
        )
    return duration


# The kinds of finding, declared once (README's table, in its order): `check --metrics-file`
# writes a sample for each, 0 included, so an alert on one sees 0 rather than no series.
FindingKind = Literal[
    "stale_sync",
    "last_run_failed",
    "project_not_synced",
    "project_error",
    "names_not_read",
    "open_not_reread",
    "retention_gap",
    "retention_coverage",
    "threshold",
    "events_backlog",
]
FINDING_KINDS: tuple[FindingKind, ...] = get_args(FindingKind)


@dataclass(frozen=True)
class Finding:
    """One thing that needs attention; `line()` is what `opsaudit check` prints."""

    check: FindingKind
    subject: str | None  # the project id, or the threshold as written; None for the whole trail
    message: str

    def line(self) -> str:
        # Escaped for the terminal: a branch's name or a server's error in it is the API's text.
        return escape_controls(f"{self.check}: {self.message}")

    def as_dict(self) -> dict[str, Any]:
        return {"check": self.check, "subject": self.subject, "message": self.message}


@dataclass
class CheckReport:
    """What `run_check` found, and the facts it measured."""

    as_of: dt.datetime
    findings: list[Finding] = field(default_factory=list)
    last_success_at: dt.datetime | None = None  # when the trail was last current (see
    # `last_success_us`)
    projects: int = 0  # projects in the state, deleted ones excluded
    open_operations: int = 0
    # Open operations by time since their last re-read ("1h", "6h", "24h", "7d", "older").
    open_by_last_read: dict[str, int] = field(default_factory=no_reread_ages)
    measured: dict[str, float | None] = field(default_factory=dict)  # threshold text -> value

    @property
    def ok(self) -> bool:
        return not self.findings

    def as_dict(self) -> dict[str, Any]:
        return {
            "status": "ok" if self.ok else "attention",
            "as_of": jsonable(self.as_of),
            "last_success_at": jsonable(self.last_success_at),
            "projects": self.projects,
            "open_operations": self.open_operations,
            "open_by_last_read": self.open_by_last_read,
            "thresholds": [{"expression": k, "value": v} for k, v in self.measured.items()],
            "findings": [f.as_dict() for f in self.findings],
        }

    def lines(self) -> list[str]:
        if self.findings:
            return [f.line() for f in self.findings]
        since = (
            "never"
            if self.last_success_at is None
            else f"{format_duration(self.as_of - self.last_success_at)} ago"
        )
        return [f"ok: last successful sync {since}, {self.projects} projects, no findings"]


def _at(us: int | None) -> dt.datetime | None:
    return None if us is None else _when(us)


def _when(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=UTC) + dt.timedelta(microseconds=us)


def _us(when: dt.datetime) -> int:
    return int(when.timestamp() * 1_000_000)


def _stamp(when: dt.datetime | None) -> str:
    return "never" if when is None else when.strftime("%Y-%m-%d %H:%M:%SZ")


def run_check(
    data_dir: Path | str,
    *,
    max_age: dt.timedelta = DEFAULT_MAX_AGE,
    reread_max_age: dt.timedelta | None = None,
    stuck_after: dt.timedelta = DEFAULT_STUCK_AFTER,
    thresholds: Sequence[Threshold] = (),
    as_of: dt.datetime | None = None,
) -> CheckReport:
    """Check the trail in `data_dir` (a directory, or `file:///abs/dir` as `sync()` and
    `connect()` take it) as of `as_of` (default: now).

    Raises `ConfigError` if `data_dir` does not exist or an argument is of the wrong type,
    `StorageError` if its state is unusable.
    """
    # max_age=7200 (seconds, as SyncConfig's durations) raised a bare TypeError once the state
    # was read.
    span = "a datetime.timedelta (e.g. timedelta(hours=2))"
    check_types(
        ("max_age", max_age, dt.timedelta, span),
        ("reread_max_age", reread_max_age, (dt.timedelta, type(None)), f"{span} or None"),
        ("stuck_after", stuck_after, dt.timedelta, span),
        ("as_of", as_of, (dt.datetime, type(None)), "a datetime.datetime or None (now)"),
    )
    # thresholds="x" (the --fail-on text) was read letter by letter: a bare AttributeError
    told = "a sequence of Threshold (exporter.ops.check.parse_threshold('stuck > 0') makes one)"
    check_type("thresholds", thresholds, Sequence, told, but=(str,))
    for threshold in thresholds:
        check_type("a threshold", threshold, Threshold, told.replace("a sequence of ", "a "))
    with reading(data_dir) as local:  # where the CLI's --data-dir and connect() look
        return _run_check(local, max_age, reread_max_age, stuck_after, thresholds, as_of)


def _run_check(
    data_dir: Path,
    max_age: dt.timedelta,
    reread_max_age: dt.timedelta | None,
    stuck_after: dt.timedelta,
    thresholds: Sequence[Threshold],
    as_of: dt.datetime | None,
) -> CheckReport:
    now = as_of or dt.datetime.now(UTC)
    report = CheckReport(as_of=now)
    state_path = Path(data_dir) / STATE_FILE
    backfilling: set[str] = set()
    if not has_state(Path(data_dir)):
        report.findings.append(no_sync_yet(data_dir))
    else:
        backfilling = _check_state(state_path, report, max_age, reread_max_age)
    _check_data(Path(data_dir), report, backfilling, stuck_after, thresholds)
    return report


def no_sync_yet(data_dir: object) -> Finding:
    """The finding of a data directory (or object-storage location) no sync has written."""
    return Finding("stale_sync", None, f"no sync has run in {data_dir} yet: run `opsaudit sync`")


# Runs that commit what they read: each moves every checkpoint it reached.
SYNCED_OUTCOMES = (Outcome.OK, Outcome.PARTIAL, Outcome.BUDGET, Outcome.INTERRUPTED)
# A last run that ended otherwise (partial, failed, auth_failed, killed) is a finding at once:
# the trail may still be within --max-age while every run fails (a revoked key), or while a
# partial run never finds a new project (a listing refused), README's exit codes.
FINE_OUTCOMES = (Outcome.OK, *STOPPED_OUTCOMES)


def last_success_us(runs: Sequence[RunRow], projects: Sequence[ProjectRow]) -> int | None:
    """When the trail was last known current (microseconds), from `runs` (oldest first) and the
    live projects' `current_at` and `first_seen_at`: `core.model.last_current`, the one
    definition the metrics and the report's freshness share (a run stopped early on purpose
    counts by the walks it completed, not by its outcome's name)."""
    return last_current(
        [(r.outcome, r.started_at, r.finished_at) for r in runs if r.finished_at is not None],
        [(p.current_at, p.first_seen_at) for p in projects if p.deleted_at is None],
    )


def _check_state(
    path: Path, report: CheckReport, max_age: dt.timedelta, reread_max_age: dt.timedelta | None
) -> set[str]:
    """The findings the state database answers; returns the projects whose first backfill has
    not completed yet (for the coverage check)."""
    from exporter.events.outbox import read_backlog  # pyarrow: only when the state is read

    now = report.as_of
    find = report.findings.append
    state = StateDB(path, read_only=True)
    try:
        # Not after as_of; a run killed with kill -9 is `killed`, as in `status` and the metrics.
        runs = settled_runs(
            [r for r in state.runs_rows() if r.started_at <= _us(now)], path.parent / LOCK_FILE
        )
        projects = [p for p in state.projects_rows() if p.deleted_at is None]
        terminal = ",".join(f"'{s}'" for s in sorted(TERMINAL_STATUSES))
        if reread_max_age is None:
            reread_max_age = default_reread_max_age(state.refresh_every())
        report.open_by_last_read = state.open_by_last_read(_us(now))
        open_rows = state.query(
            "SELECT o.project_id, count(*), sum(o.checked_us < ?), min(o.checked_us) "
            "FROM open_ops o JOIN projects p ON p.id = o.project_id "
            f"WHERE p.deleted_us IS NULL AND coalesce(o.status NOT IN ({terminal}), true) "
            "GROUP BY o.project_id ORDER BY o.project_id",
            (_us(_back(now, reread_max_age)),),
        )
        backlog = read_backlog(state)
        # Walked, but the branches and endpoints never listed, and first listed longer ago
        # than --max-age: runs cut before the names (a time budget too short for them).
        unnamed = state.query(
            "SELECT id FROM projects WHERE deleted_us IS NULL AND names_read_us IS NULL "
            "AND last_synced_us IS NOT NULL AND first_seen_us < ? ORDER BY id",
            (_us(_back(now, max_age)),),
        )
    finally:
        state.close()

    # The whole trail: the last successful run, and gaps the platform's retention could fill.
    report.last_success_at = _at(last_success_us(runs, projects))
    # The newest start of a run that committed: a stale project or trail with one since was
    # left out by it (a scoped or budgeted run vouches for no other project): the line says so.
    newest_start = max((r.started_at for r in runs if r.outcome in SYNCED_OUTCOMES), default=None)
    if report.last_success_at is None:
        find(Finding("stale_sync", None, "no sync has succeeded yet (see `opsaudit status`)"))
    elif now - report.last_success_at > max_age:
        since = ""
        if newest_start is not None and _when(newest_start) > report.last_success_at:
            since = (
                "; the runs since did not cover every project (`--project` or `--org-id`, cut "
                "short by a budget or a stop, or a project failing)"
            )
        find(
            Finding(
                "stale_sync",
                None,
                f"last successful sync finished {_stamp(report.last_success_at)} "
                f"({format_duration(now - report.last_success_at)} ago), longer ago than "
                f"--max-age {format_duration(max_age)}{since}",
            )
        )
    ended = [r for r in runs if r.outcome != Outcome.RUNNING]  # one under way is not judged
    if ended and ended[-1].outcome not in FINE_OUTCOMES:
        find(_last_run_failed(ended[-1], now))
    # A run that synced anything (ok, partial, budget, interrupted) moves every checkpoint it could; between two
    # such runs more than RETENTION apart, operations may have come and gone unseen.
    synced = [
        (r.started_at, r.finished_at)
        for r in runs
        if r.outcome in SYNCED_OUTCOMES and r.finished_at is not None
    ]
    for (_, previous_end), (next_start, _) in itertools.pairwise(synced):
        gap = _when(next_start) - _when(previous_end)
        if gap > RETENTION:
            find(
                Finding(
                    "retention_gap",
                    None,
                    f"{format_duration(gap)} between the runs that finished "
                    f"{_stamp(_when(previous_end))} and started {_stamp(_when(next_start))}: "
                    "longer than the platform keeps operations (about 6 months); some may "
                    "have been deleted unseen",
                )
            )
    if synced and now - _when(synced[-1][1]) > RETENTION:
        find(
            Finding(
                "retention_gap",
                None,
                f"the last run that synced finished {_stamp(_when(synced[-1][1]))}, longer ago "
                "than the platform keeps operations (about 6 months): run `opsaudit sync` now",
            )
        )

    # Per project: synced recently, and without an error.
    report.projects = len(projects)
    backfilling: set[str] = set()
    for p in projects:
        pid, error, last = p.id, p.last_error, _at(p.last_synced_at)
        current = _at(p.current_at)
        if last is None:
            find(Finding("project_not_synced", pid, f"project {pid} has never completed a sync"))
        elif current is not None and now - current > max_age:
            # A project `--skip-idle` left is current as of the listing that showed it idle.
            when = f"last synced {_stamp(last)}"
            if current != last:
                when += f", last found idle {_stamp(current)}"
            if not error and newest_start is not None and _when(newest_start) > current:
                when_left = (
                    "; the runs since left it out (`--project` or `--org-id`, a budget, or a "
                    "listing that no longer shows it)"
                )
            else:
                when_left = ""
            find(
                Finding(
                    "project_not_synced",
                    pid,
                    f"project {pid} {when} ({format_duration(now - current)} ago), longer ago "
                    f"than --max-age {format_duration(max_age)}{when_left}",
                )
            )
        if error:
            find(Finding("project_error", pid, f"project {pid} failed its last sync: {error}"))
        if last is None:
            backfilling.add(pid)
    for (pid,) in unnamed:
        find(
            Finding(
                "names_not_read",
                pid,
                f"project {pid}: its branches and endpoints were never listed (its operations "
                "have no names) though it was first listed longer ago than --max-age; runs end "
                "before they are read: raise --time-budget or --max-requests",
            )
        )

    # Open operations the bounded refresh has not reached for too long.
    for pid, count, stale, oldest_checked_us in open_rows:
        report.open_operations += count
        oldest = _at(oldest_checked_us)
        if stale:
            find(
                Finding(
                    "open_not_reread",
                    pid,
                    f"project {pid}: {stale:,} open operation(s) not re-read for more than "
                    f"{format_duration(reread_max_age)} (oldest check {_stamp(oldest)})",
                )
            )
    # Events a sink has not taken (a receiver down, a file not writable): never dropped, so
    # they pile up; once older than --max-age someone should look (issue 22).
    if backlog.oldest_us is not None and now - _when(backlog.oldest_us) > max_age:
        sinks = [sink for sink, n in backlog.pending.items() if n]
        waiting = ", ".join(f"{backlog.pending[sink]} for the {sink}" for sink in sinks)
        find(
            Finding(
                "events_backlog",
                None,
                f"{backlog.total} event(s) waiting for delivery ({waiting}), the oldest since "
                f"{_stamp(_when(backlog.oldest_us))}, longer than --max-age "
                f"{format_duration(max_age)}: {_why_waiting(sinks)} the next sync given the "
                f"sink{'s' if len(sinks) > 1 else ''} retries them (a sink no longer used: "
                f"`opsaudit discard-events --sink {'|'.join(sinks)}`)",
            )
        )
    return backfilling


# What to look at for each sink that waits: only the webhook has a receiver to be down.
_WHY_WAITING = {
    "file": "can the events file be appended to (a full or read-only disk, its permissions, a "
    "directory in its place)?",
    "webhook": "is the webhook's receiver down?",
}


def _why_waiting(sinks: list[str]) -> str:
    return " ".join(_WHY_WAITING.get(sink, f"can the {sink} take them?") for sink in sinks)


def _last_run_failed(run: RunRow, now: dt.datetime) -> Finding:
    """The finding of a last run that failed: its outcome, when, and its error as stored
    (redacted when it was recorded)."""
    if run.finished_at is None:  # killed: it never finished
        when = f"started {_stamp(_when(run.started_at))}"
        ago = now - _when(run.started_at)
    else:
        when = f"finished {_stamp(_when(run.finished_at))}"
        ago = now - _when(run.finished_at)
    if run.error:
        why = f": {run.error}"
    elif run.outcome == Outcome.KILLED:
        why = " (its process died before it finished: see the sync's log)"
    else:
        why = " (see `opsaudit status` and the sync's log)"
    return Finding(
        "last_run_failed",
        None,
        f"the last sync, {when} ({format_duration(ago)} ago), ended {run.outcome}{why}",
    )


def _back(when: dt.datetime, span: dt.timedelta) -> dt.datetime:
    """`when - span`, or the first instant a datetime holds when `span` reaches past it (a
    --max-age of 99999999d: nothing is older; it exited 5, "a bug")."""
    try:
        return when - span
    except OverflowError:
        return dt.datetime.min.replace(tzinfo=dt.timezone.utc)


def default_reread_max_age(refresh_every_us: int | None) -> dt.timedelta:
    """How long an open operation may go without a re-read before `check` says so: the bound
    the last sync ran with (--refresh-open-every) plus a grace for the next run."""
    if not refresh_every_us:
        return DEFAULT_REREAD_MAX_AGE
    return dt.timedelta(microseconds=refresh_every_us) + REREAD_GRACE


def _timestamp_literal(when: dt.datetime) -> str:
    return f"TIMESTAMPTZ '{when.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f')}+00'"


def _interval_literal(delta: dt.timedelta) -> str:
    return f"INTERVAL '{int(delta.total_seconds() * 1_000_000)} microseconds'"


def _check_data(
    data_dir: Path,
    report: CheckReport,
    backfilling: set[str],
    stuck_after: dt.timedelta,
    thresholds: Sequence[Threshold],
) -> None:
    """Coverage against retention, and the `--fail-on` thresholds, from the Parquet data.

    Coverage: a completed backfill reads a project's history down to the API's oldest
    operation, so the stored history can only fall short of the API's while the first backfill
    of a project is still under way (it walks newest first). Once it has reached operations
    close to the retention horizon, what it has not read yet is being deleted by the platform.
    (Comparing with the API's oldest operation directly would cost a walk of the whole history.)
    """
    if not backfilling and not thresholds:
        return
    from exporter.analytics.views import connect, execute  # DuckDB: only for the checks that query

    con = connect(data_dir, only=("00_base.sql", "40_stuck.sql"))
    try:
        if backfilling:
            _, rows = execute(
                con,
                "SELECT project_id, min(created_at) FROM operation_versions "
                "GROUP BY project_id ORDER BY project_id",
            )
            horizon = report.as_of - RETENTION
            for pid, oldest_stored in rows:
                if pid in backfilling and oldest_stored - horizon < COVERAGE_MARGIN:
                    report.findings.append(
                        Finding(
                            "retention_coverage",
                            pid,
                            f"project {pid}: its first backfill has not completed and has read "
                            f"back to {_stamp(oldest_stored)}; the platform deletes operations "
                            f"after about 6 months ({_stamp(horizon)}), so the rest of its "
                            "history is being lost: let `opsaudit sync` finish (see its errors)",
                        )
                    )
        _check_actions(con, thresholds)
        for t in thresholds:
            value = _measure(con, t, report.as_of, stuck_after)
            report.measured[t.text] = value
            if value is not None and t.crossed(value):
                message = _threshold_message(t, value, stuck_after)
                if t.metric == "failure_rate":
                    message += _worst_branch(con, t, report.as_of)
                report.findings.append(Finding("threshold", t.text, message))
    finally:
        con.close()


def _check_actions(con: Any, thresholds: Sequence[Threshold]) -> None:
    """`ConfigError` (exit 2) for a threshold on an action neither documented nor in the data."""
    from exporter.analytics.views import execute  # DuckDB: only for the checks that query

    named = {t.action for t in thresholds if t.action is not None}
    if not named:
        return
    _, rows = execute(con, "SELECT DISTINCT action FROM operations WHERE action IS NOT NULL")
    known = sorted(set(DOCUMENTED_ACTIONS) | {r[0] for r in rows})
    for t in thresholds:
        if t.action is not None and t.action not in known:
            raise ConfigError(
                f"--fail-on {t.text!r}: unknown action {t.action!r}; known actions: "
                f"{', '.join(known)}"
            )


def _measure(con: Any, t: Threshold, as_of: dt.datetime, stuck_after: dt.timedelta) -> float | None:
    from exporter.analytics.views import execute  # DuckDB: only for the checks that query

    action = "" if t.action is None else " AND action = ?"
    params = [] if t.action is None else [t.action]
    if t.metric == "failure_rate":
        assert t.window is not None
        _, rows = execute(
            con,
            "SELECT count(*), count(*) FILTER (WHERE is_failed(failures_count)) FROM operations "
            f"WHERE created_at >= {_timestamp_literal(_back(as_of, t.window))} "
            f"AND created_at < {_timestamp_literal(as_of)}" + action,
            params,
        )
        operations, failed = rows[0]
        return None if operations == 0 else failed / operations
    where = [] if t.action is None else ["action = ?"]
    if t.window is not None:
        where.append(f"created_at >= {_timestamp_literal(_back(as_of, t.window))}")
    _, rows = execute(
        con,
        "SELECT count(*) FROM stuck_operations_older_than("
        f"{_interval_literal(stuck_after)}, as_of := {_timestamp_literal(as_of)})"
        + (f" WHERE {' AND '.join(where)}" if where else ""),
        params,
    )
    return float(rows[0][0])


def _worst_branch(con: Any, t: Threshold, as_of: dt.datetime) -> str:
    """Where most of a crossed failure rate comes from, by name: "; most: start_compute failed 4
    times on `preview/pr-42` (br-...)" ("" when no failed operation names a branch)."""
    from exporter.analytics.views import execute  # DuckDB: only for the checks that query

    assert t.window is not None
    action = "" if t.action is None else " AND o.action = ?"
    _, rows = execute(
        con,
        "SELECT o.branch_id, any_value(b.name), any_value(b.deleted_at) IS NOT NULL, o.action, "
        "count(*) AS failed FROM operations AS o LEFT JOIN branches AS b ON b.id = o.branch_id "
        f"WHERE is_failed(o.failures_count) AND o.branch_id IS NOT NULL "
        f"AND o.created_at >= {_timestamp_literal(_back(as_of, t.window))} "
        f"AND o.created_at < {_timestamp_literal(as_of)}{action} "
        "GROUP BY o.branch_id, o.action ORDER BY failed DESC, o.branch_id, o.action LIMIT 1",
        [] if t.action is None else [t.action],
    )
    if not rows:
        return ""
    branch_id, name, deleted, action_name, failed = rows[0]
    return f"; most: {branch_failure_line(action_name, failed, name, branch_id, deleted=deleted)}"


def _threshold_message(t: Threshold, value: float, stuck_after: dt.timedelta) -> str:
    scope = "all actions" if t.action is None else t.action
    if t.metric == "failure_rate":
        assert t.window is not None
        return (
            f"failure rate of {scope} over the last {format_duration(t.window)} is "
            f"{100 * value:.1f}% ({t.text})"
        )
    created = "" if t.window is None else f" created in the last {format_duration(t.window)}"
    return (
        f"{int(value):,} operation(s) of {scope}{created} not terminal "
        f"{format_duration(stuck_after)} after creation ({t.text})"
    )
