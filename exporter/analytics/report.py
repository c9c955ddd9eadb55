"""The report (failures, durations, action mix per action) as data; `report_text` renders it."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, SupportsIndex

import orjson

from exporter.analytics.format import branch_failure_line, branch_label, jsonable
from exporter.analytics.report_figures import (
    HEADLINE_BRANCHES,
    ROWS,
    SUMMARY,
    Problems,
    by_action,
    by_action_scan,
    failure_groups,
    fetch_records,
    freshness,
    keep_rows,
    problems,
    problems_json,
    recorded,
    string_list_literal,
    timestamp_literal,
    totalled,
    whole_months,
)
from exporter.analytics.views import execute
from exporter.analytics.window import parse_since, parse_until
from exporter.core.duck import duckdb
from exporter.core.errors import check_types

__all__ = [
    "BRANCH_COLUMNS",
    "BRANCH_FAILURE_COLUMNS",
    "DURATION_COLUMNS",
    "ERROR_COLUMNS",
    "FAILING_COLUMNS",
    "FAILURE_COLUMNS",
    "MIX_COLUMNS",
    "ON_CALL_SHOWN",
    "PROJECT_COLUMNS",
    "REPORT_SQL",
    "STUCK_AFTER",
    "STUCK_COLUMNS",
    "Report",
    "branch_failure_text",
    "build_report",
    "describe_window",
    "empty_message",
    "parse_since",
    "parse_until",
    "window_parts",
    "with_branch",
]

# The columns of each section, as `report_failures`, `report_durations` and
# `report_action_mix` in sql/90_report.sql name them.
FAILURE_COLUMNS = ("action", "operations", "failed", "failure_rate", "retries", "failing_now")
DURATION_COLUMNS = (
    "action",
    "operations",
    "p50_ms",
    "p90_ms",
    "p99_ms",
    "max_ms",
    "wall_p50_ms",
    "wall_p90_ms",
    "wall_p99_ms",
    "wall_max_ms",
)
MIX_COLUMNS = ("action", "operations", "share")
# The operations on-call looks at first, oldest first (issue 23).
# Each with its branch by name (issue 21): branch_deleted_at once no longer listed.
FAILING_COLUMNS = (
    "id",
    "project_id",
    "branch_id",
    "branch_name",
    "branch_deleted_at",
    "action",
    "status",
    "error",
    "age",
)
STUCK_COLUMNS = FAILING_COLUMNS
# ... and on a terminal or a page, the branch in one column (`with_branch`).
ON_CALL_SHOWN = ("id", "project_id", "branch", "action", "status", "error", "age")
ERROR_COLUMNS = ("error", "operations", "actions", "last_seen")
PROJECT_COLUMNS = ("project_id", "operations", "failed", "failure_rate", "retries", "failing_now")
# Failures per branch by name (issue 21): `report_branches` in sql/90_report.sql; deleted_at is
# set once a listing of its project no longer had the branch.
BRANCH_COLUMNS = (
    "branch_name",
    "branch_id",
    "project_id",
    "deleted_at",
    "operations",
    "failed",
    "failure_rate",
    "retries",
    "failing_now",
)
# Where failures come from: one row per branch and action that failed, most first.
BRANCH_FAILURE_COLUMNS = (
    "action",
    "failed",
    "branch_name",
    "branch_id",
    "project_id",
    "deleted_at",
)
# The lists of failures per project, per branch and per branch and action: each grain of
# report_failure_groups_* (report_figures.failure_groups), its list and its columns.
_GROUPS = {
    "project": ("projects", PROJECT_COLUMNS),
    "branch": ("branches", BRANCH_COLUMNS),
    "branch_action": ("branch_failures", BRANCH_FAILURE_COLUMNS),
}
# A headline figure over fewer operations than this shows its n (`p90 43,303 ms (n=24)`).
SMALL_N = 100
# The .sql files the report needs: `connect(data_dir, only=REPORT_SQL)` skips binding the rest.
REPORT_SQL = ("00_base.sql", "90_report.sql")
# "Stuck": not terminal this long after creation, as the stuck_operations view (40_stuck.sql).
STUCK_AFTER = dt.timedelta(hours=1)


@dataclass
class Report:
    """The headline numbers over a window of created_at and a set of projects."""

    since: dt.datetime | None  # inclusive bound on created_at; None = from the beginning
    until: dt.datetime | None  # exclusive bound on created_at; None = no bound
    project_ids: list[str] | None  # None = every project
    operations: int  # operations (latest states) in the window
    failures: list[dict[str, Any]] = field(default_factory=list)
    durations: list[dict[str, Any]] = field(default_factory=list)
    action_mix: list[dict[str, Any]] = field(default_factory=list)
    stuck: int = 0  # not terminal, not failing, created more than `stuck_after` before `as_of`
    stuck_failing: int = 0  # failing now and created more than `stuck_after` before `as_of`
    failing_operations: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    stuck_operations: list[dict[str, Any]] = field(default_factory=list)  # oldest first
    errors: list[dict[str, Any]] = field(default_factory=list)  # top error texts
    projects: list[dict[str, Any]] = field(default_factory=list)  # failures per project
    branches: list[dict[str, Any]] = field(default_factory=list)  # failures per branch
    branch_failures: list[dict[str, Any]] = field(default_factory=list)  # per branch and action
    # How fresh the data is: the last successful sync (outcome ok), its lag at `as_of`, the
    # share of projects it had walked within the day; the newest run of any outcome.
    freshness: dict[str, Any] = field(default_factory=dict)
    first_created_at: dt.datetime | None = None  # the oldest operation in scope
    last_created_at: dt.datetime | None = None  # the newest operation in scope
    as_of: dt.datetime | None = None  # "now" for `stuck`
    stuck_after: dt.timedelta = STUCK_AFTER
    # `build_report(lists_as_json=True)`: the failing and stuck lists as the JSON format writes
    # them (`_problems_json`), and the two lists above left empty.
    lists_json: tuple[bytes, bytes] | None = None
    # `build_report(top=N)`: the lists of operations, projects and branches hold their first N
    # rows (for the terminal table and the HTML page, which show a few; branch_failures at
    # least the headline's), and these how many there are in all (None: the list's length).
    top: int | None = None
    failing_total: int | None = None
    stuck_total: int | None = None
    projects_total: int | None = None
    branches_total: int | None = None
    branch_failures_total: int | None = None

    def totals(self) -> dict[str, int]:
        """How many rows each list of the report holds in all, by its attribute's name (the
        lists a `top` cuts: more than they hold then)."""
        lists = {
            "failing_operations": self.failing_total,
            "stuck_operations": self.stuck_total,
            "projects": self.projects_total,
            "branches": self.branches_total,
            "branch_failures": self.branch_failures_total,
        }
        return {
            name: len(getattr(self, name)) if total is None else total
            for name, total in lists.items()
        }

    def check_lists(self, shown: int | None = None) -> None:
        """Raise unless the lists hold what is shown of them: their first `shown` rows (the
        table format, the HTML page), or every row (None: every other format writes them
        whole)."""
        if self.top is None or (shown is not None and shown <= self.top):
            return
        if any(total > len(getattr(self, name)) for name, total in self.totals().items()):
            raise ValueError(f"the report's lists hold only their first {self.top} rows")

    def headline(self) -> dict[str, Any]:
        """The figures above the tables: scope, failure rate, failing now, stuck, the three
        actions with the most failures, the slowest action by p90 of total_duration_ms."""
        failed = sum(r["failed"] for r in self.failures)
        timed = sorted(
            (r for r in self.durations if r["p90_ms"] is not None),
            key=lambda r: (-r["p90_ms"], *_named_last(r["action"])),
        )
        return {
            "operations": self.operations,
            "first_created_at": self.first_created_at,
            "last_created_at": self.last_created_at,
            "failed": failed,
            "failure_rate": failed / self.operations if self.operations else None,
            "retries": sum(r["retries"] for r in self.failures),
            "failing_now": sum(r["failing_now"] for r in self.failures),
            "stuck": self.stuck,
            "stuck_failing": self.stuck_failing,
            "stuck_after": self.stuck_after,
            "as_of": self.as_of,
            # self.failures is sorted by failed, then operations, then action.
            "most_failures": [
                {"action": r["action"], "failed": r["failed"]} for r in self.failures if r["failed"]
            ][:3],
            # self.branch_failures is sorted by failed, then operations, project, branch, action.
            "most_failures_by_branch": self.branch_failures[:HEADLINE_BRANCHES],
            "slowest_p90": (
                {
                    "action": timed[0]["action"],
                    "p90_ms": timed[0]["p90_ms"],
                    "n": timed[0]["operations"],
                }
                if timed
                else None
            ),
        }

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape: window, operations, the headline, then the three sections."""
        values = self.fields()
        if self.lists_json is not None:  # the lists as written: read back
            values["failing_operations"], values["stuck_operations"] = map(
                orjson.loads, self.lists_json
            )
        return dict(jsonable(values))

    def fields(self) -> dict[str, Any]:
        """`as_dict` with the values as computed (datetimes, intervals), not yet `jsonable`:
        `format.json_bytes` writes it as `as_dict` reads, without copying every row first (the
        failing and stuck lists as written already where `lists_json` holds them)."""
        self.check_lists()
        failing: Any = self.failing_operations
        stuck: Any = self.stuck_operations
        if self.lists_json is not None:
            failing, stuck = (orjson.Fragment(text) for text in self.lists_json)
        return {
            "since": self.since,
            "until": self.until,
            "projects": self.project_ids,
            "operations": self.operations,
            "freshness": self.freshness,
            "headline": self.headline(),
            "failing_operations": failing,
            "stuck_operations": stuck,
            "errors": self.errors,
            "projects_failures": self.projects,
            "branches_failures": self.branches,
            "branch_failures": self.branch_failures,
            "failures": self.failures,
            "durations": self.durations,
            "action_mix": self.action_mix,
        }


def build_report(
    con: duckdb.DuckDBPyConnection,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    project_ids: Sequence[str] | None = None,
    now: dt.datetime | None = None,
    stuck_after: dt.timedelta = STUCK_AFTER,
    lists_as_json: bool = False,
    top: int | None = None,
) -> Report:
    """Compute the report on a connection from `exporter.connect()`, in one pass over the data.

    `now` (default: the current time) is when an open operation's age is measured for `stuck`.
    `lists_as_json`: the failing and stuck lists only as the JSON format writes them
    (`Report.lists_json`; `opsaudit report --format json`), not as rows.
    `top` (1 or more): the lists only as far as a table shows them (the table format and the
    HTML page): the oldest `top` failing and stuck operations, the first `top` projects and
    branches, the first `top` branch and action pairs (the headline's 3 at least), with each
    list's length (`Report.top`, `Report.totals`).
    """
    point, moment = "a timezone-aware datetime.datetime or None", (dt.datetime, type(None))
    parse = "exporter.analytics.report.parse"  # the command line's text as a bound
    check_types(
        ("con", con, duckdb.DuckDBPyConnection, "a connection from exporter.connect()"),
        ("since", since, moment, f"{point} ({parse}_since('7d') reads --since's text)"),
        ("until", until, moment, f"{point} ({parse}_until('2024-06-30') reads --until's)"),
        ("now", now, moment, point),
        ("stuck_after", stuck_after, dt.timedelta, "a datetime.timedelta"),
        ("top", top, (SupportsIndex, type(None)), "an int or None"),  # numpy's ints too
        but=(bool,),
        error=ValueError,  # as for top=0 (since="7d", a data directory for con: bare ones)
    )
    top = None if top is None else int(top)  # numpy.int64(3), a DataFrame's count: 3
    if top is not None and top < 1:
        raise ValueError(f"top must be 1 or more, not {top}")
    if isinstance(project_ids, str):  # its characters were the projects: 0 operations
        raise ValueError(f"project_ids is a list of ids, not the string {project_ids!r}")
    projects = list(project_ids) if project_ids else None
    as_of = now or dt.datetime.now(dt.timezone.utc)
    # Literals, not prepared parameters: the planner folds them, so the window prunes Hive
    # partitions and row groups (a parameter is unknown when the plan is made).
    window = (
        f"since := {timestamp_literal(since)}, until := {timestamp_literal(until)}, "
        f"projects := {string_list_literal(projects)}"
    )
    when = (
        f"as_of := {timestamp_literal(as_of)}, "
        f"stuck_after := INTERVAL '{int(stuck_after.total_seconds() * 1_000_000)} microseconds'"
    )
    # Every section starts from the few rows of `report_rows`, kept once: from the flagged
    # record where the dataset has one, else the ids are read once (sql/90_report.sql). Where
    # the dataset has the summary record and the window holds whole months, the counts and
    # durations read it instead of every version.
    all_time = since is None and until is None and projects is None
    try:
        keep_rows(con, window, whole=all_time)
        if projects is None and whole_months(since, until, as_of) and recorded(con):
            # `recorded` as a literal: the planner then drops the scan of the rows of the whole
            # months (sql/90_report.sql, report_summary).
            # All time: the record's total over every month where the dataset has one (a
            # window rules it out itself: report_from_total).
            total = "NULL"
            if all_time:
                total = "true" if totalled(con) else "false"
            execute(
                con,
                f"CREATE OR REPLACE TEMP TABLE {SUMMARY} AS "
                f"FROM report_summary({window}, recorded := true, total := {total})",
            )
            records, first, last = by_action(con, window, when, string_list_literal(projects))
            groups = failure_groups(
                con, f"report_failure_groups_in({ROWS}, {SUMMARY})", _GROUPS, top
            )
        else:
            records, first, last = by_action_scan(con, window, when)
            groups = failure_groups(
                con, f"report_failure_groups_scan({ROWS}, {window})", _GROUPS, top
            )
        lists = problems_json(con, when) if lists_as_json else None
        if lists is not None:
            lists_json, stuck_failing = lists
            found = Problems([], [], stuck_failing, 0, 0)
        else:
            lists_json = None
            found = problems(con, when, FAILING_COLUMNS, top)
        errors = fetch_records(con, f"SELECT * FROM report_errors_in({ROWS})")
    finally:
        execute(con, f"DROP TABLE IF EXISTS {ROWS}")
        execute(con, f"DROP TABLE IF EXISTS {SUMMARY}")
    failures = sorted(
        records, key=lambda r: (-r["failed"], -r["operations"], *_named_last(r["action"]))
    )
    durations = [
        {"action": r["action"], "operations": r["terminal"]}
        | {c: r[c] for c in DURATION_COLUMNS[2:]}
        for r in records
        if r["terminal"]
    ]
    durations.sort(key=lambda r: (-r["operations"], *_named_last(r["action"])))
    return Report(
        since=since,
        until=until,
        project_ids=projects,
        operations=sum(r["operations"] for r in records),
        failures=[{c: r[c] for c in FAILURE_COLUMNS} for r in failures],
        durations=durations,
        action_mix=[{c: r[c] for c in MIX_COLUMNS} for r in records],
        stuck=sum(r["stuck"] for r in records),
        stuck_failing=found.stuck_failing,
        failing_operations=found.failing,
        stuck_operations=found.stuck,
        errors=errors,
        **groups,
        freshness=freshness(con, as_of),
        first_created_at=first,
        last_created_at=last,
        as_of=as_of,
        stuck_after=stuck_after,
        lists_json=lists_json,
        top=top,
        failing_total=found.failing_total,
        stuck_total=found.stuck_total,
    )


def _named_last(action: str | None) -> tuple[bool, str]:
    """An action as a sort key, none after every name (SQL's NULLS LAST: an operation whose
    page had no action is stored without one)."""
    return action is None, action or ""


def branch_failure_text(row: dict[str, Any]) -> str:
    """One row of `Report.branch_failures` in words (PRODUCT.md, names not ids):
    "start_compute failed 4 times on `preview/pr-42` (br-...)"."""
    return branch_failure_line(
        row["action"],
        row["failed"],
        row["branch_name"],
        row["branch_id"],
        deleted=row["deleted_at"] is not None,
    )


def with_branch(rows: list[dict[str, Any]], deleted: str = "deleted_at") -> list[dict[str, Any]]:
    """`rows` with a "branch" first: the branch in words as `branch_label` says it (name, id,
    deleted marked by the `deleted` column); None for a row without a branch."""
    return [
        {
            "branch": None
            if r["branch_id"] is None
            else branch_label(r["branch_name"], r["branch_id"], deleted=r[deleted] is not None)
        }
        | r
        for r in rows
    ]


def window_parts(report: Report, *, since: str = "since", projects: str = "project") -> list[str]:
    """The report's window in words, one part per bound given ([] for all time, all
    projects); `since` and `projects` are the words before the start and the project ids."""
    parts = []
    if report.since is not None:
        parts.append(f"{since} {jsonable(report.since)}")
    if report.until is not None:
        parts.append(f"until {jsonable(report.until)}")
    if report.project_ids:
        parts.append(f"{projects} {', '.join(report.project_ids)}")
    return parts


def describe_window(report: Report) -> str:
    """The window in words: "since ...; project ..." or "all time, all projects"."""
    parts = window_parts(report)
    return "; ".join(parts) if parts else "all time, all projects"


def empty_message(report: Report) -> str:
    """What to say when the report has no operations."""
    if report.since is None and report.until is None and not report.project_ids:
        return "No operations in the dataset yet: run `opsaudit sync` first."
    return f"No operations match ({describe_window(report)})."
