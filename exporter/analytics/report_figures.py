"""The report's figures (`report.build_report`): per action from the summary record where the
dataset has it and the window holds whole months, else from one scan of every version
(sql/90_report.sql, DESIGN.md: the report's summary record); the first and last created_at of the
latest states; the failing and stuck lists; failures per project, branch and action; freshness;
the SQL literals of a window."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple

from exporter.analytics.views import execute, sql_names_for
from exporter.core.duck import duckdb
from exporter.core.model import last_current

__all__ = [
    "HEADLINE_BRANCHES",
    "REPORT_CALLS",
    "ROWS",
    "SUMMARY",
    "Problems",
    "by_action",
    "by_action_scan",
    "failure_groups",
    "fetch_records",
    "freshness",
    "keep_rows",
    "picker",
    "problems",
    "problems_json",
    "recorded",
    "report_names",
    "string_list_literal",
    "timestamp_literal",
    "totalled",
    "whole_months",
]


def timestamp_literal(value: dt.datetime | None) -> str:
    if value is None:
        return "NULL"
    if value.tzinfo is None:
        raise ValueError("report bounds must be timezone-aware datetimes")
    utc = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return f"TIMESTAMPTZ '{utc}+00'"


def string_list_literal(values: Sequence[str] | None) -> str:
    if values is None:
        return "NULL"
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"[{quoted}]::VARCHAR[]"


# The views and macros the report's queries name (build_report, these figures, the HTML page,
# `opsaudit report`'s check of --project): `connect(..., names=report_names())` defines these
# and what they name in turn, not every definition of report.REPORT_SQL's files (each costs
# DuckDB a parse: ~13 ms of every report, issue 24). tests/analytics/test_report.py checks the
# list against the names the SQL text of those modules mentions.
REPORT_CALLS = """
    branches is_failed is_terminal operations projects report_by_action report_by_action_in
    report_by_action_scan report_errors_in report_failure_groups_in report_failure_groups_scan
    report_flagged_recorded report_flagged_rows report_flagged_rows_whole report_operations
    report_problems_in report_problems_json report_problems_top report_rows report_summary
    report_summary_recorded report_summary_total_recorded report_superseded_rows
    report_superseded_unflagged sync_runs
"""


@functools.cache
def report_names() -> frozenset[str]:
    """REPORT_CALLS and every view and macro their definitions name (`views.sql_names_for`)."""
    names = sql_names_for(REPORT_CALLS)
    assert names is not None  # no catalog word among them
    return names


ROWS = "_opsaudit_report_rows"  # report_rows of one report (dropped once it is built)
SUMMARY = "_opsaudit_report_summary"  # report_summary of one report (likewise)
_UNFLAGGED = "_opsaudit_report_unflagged"  # report_superseded_unflagged (while rows are kept)


def keep_rows(con: duckdb.DuckDBPyConnection, window: str, *, whole: bool = False) -> None:
    """Keep the window's report_rows in the temporary table ROWS: from the flagged record where
    the dataset has one (no version read, unless a superseded version is terminal without an
    error text: then the window's versions are probed for those), else from every version
    (sql/90_report.sql). `whole`: the window is the whole dataset (all time, every project):
    the record's rows and the superseded versions it lacks come from one join."""
    flagged = execute(con, "SELECT report_flagged_recorded()")[1][0][0]
    if not flagged:
        execute(con, f"CREATE OR REPLACE TEMP TABLE {ROWS} AS FROM report_rows({window})")
        return
    if whole:
        execute(con, f"CREATE OR REPLACE TEMP TABLE {ROWS} AS FROM report_flagged_rows_whole()")
        unflagged = f"SELECT id, version FROM {ROWS} WHERE superseded IS NULL"
    else:
        execute(con, f"CREATE OR REPLACE TEMP TABLE {ROWS} AS FROM report_flagged_rows({window})")
        unflagged = "FROM report_superseded_unflagged()"
    execute(con, f"CREATE OR REPLACE TEMP TABLE {_UNFLAGGED} AS {unflagged}")
    try:
        if execute(con, f"SELECT count(*) FROM {_UNFLAGGED}")[1][0][0]:
            execute(con, f"DELETE FROM {ROWS} WHERE superseded IS NULL")
            execute(con, f"INSERT INTO {ROWS} FROM report_superseded_rows({_UNFLAGGED}, {window})")
    finally:
        execute(con, f"DROP TABLE IF EXISTS {_UNFLAGGED}")


def recorded(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the dataset has the summary record (sql/90_report.sql)."""
    return bool(execute(con, "SELECT report_summary_recorded()")[1][0][0])


def totalled(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether the dataset has the summary's total over all months (sql/90_report.sql)."""
    return bool(execute(con, "SELECT report_summary_total_recorded()")[1][0][0])


def whole_months(since: dt.datetime | None, until: dt.datetime | None, as_of: dt.datetime) -> bool:
    """Whether the window [since, until) holds a calendar month (UTC) the summary record
    serves, one it holds whole: a month that starts at `since` or later and ends by `until`;
    with no `until`, one that has begun by `as_of` (no operation is created later). A window of
    parts of months (`--since 7d`) reads its rows in any case, as it did before the record."""
    if since is None:
        return True
    start = since.astimezone(dt.timezone.utc)
    first = dt.datetime(start.year, start.month, 1, tzinfo=dt.timezone.utc)
    if first < start:
        first = _next_month(first)
    return first <= as_of if until is None else _next_month(first) <= until


def _next_month(month: dt.datetime) -> dt.datetime:
    return month.replace(year=month.year + month.month // 12, month=month.month % 12 + 1)


def by_action_scan(
    con: duckdb.DuckDBPyConnection, window: str, when: str
) -> tuple[list[dict[str, Any]], dt.datetime | None, dt.datetime | None]:
    """Per action without the summary record: every version minus the superseded ones where
    exact, else the latest states (the probe of every id)."""
    records = fetch_records(con, f"SELECT * FROM report_by_action_scan({ROWS}, {window}, {when})")
    if not all([r.pop("exact") for r in records]):
        records = fetch_records(con, f"SELECT * FROM report_by_action({window}, {when})")
    first = min((r["first_created_at"] for r in records), default=None)
    last = max((r["last_created_at"] for r in records), default=None)
    return records, first, last


def by_action(
    con: duckdb.DuckDBPyConnection, window: str, when: str, projects: str
) -> tuple[list[dict[str, Any]], dt.datetime | None, dt.datetime | None]:
    """Per action, from the summary less the superseded versions; and the first and last
    created_at of the latest states in the window."""
    records = fetch_records(con, f"SELECT * FROM report_by_action_in({ROWS}, {SUMMARY}, {when})")
    _quantiles(con, records)
    first = min((r["first_created_at"] for r in records), default=None)
    last = max((r["last_created_at"] for r in records), default=None)
    # Every version's extremes: a latest state's unless only superseded versions hold one.
    doubtful = [
        bound
        for bound, key, exact in (
            (first, "first_created_at", "first_exact"),
            (last, "last_created_at", "last_exact"),
        )
        if not all(r.pop(exact) for r in records if r[key] == bound)
    ]
    for r in records:
        r.pop("first_exact", None)
        r.pop("last_exact", None)
    if any(not _latest_at(con, bound, projects) for bound in doubtful if bound is not None):
        _, rows = execute(
            con, f"SELECT min(created_at), max(created_at) FROM report_operations({window})"
        )
        first, last = rows[0]
    return records, first, last


# The quantile columns of report_by_action, and the points report_by_action_in gives for them.
_QUANTILES = (
    ("ms_points", ("p50_ms", "p90_ms", "p99_ms")),
    ("wall_points", ("wall_p50_ms", "wall_p90_ms", "wall_p99_ms")),
)


def _quantiles(con: duckdb.DuckDBPyConnection, records: list[dict[str, Any]]) -> None:
    """Each record's quantiles from its points (sql/90_report.sql, report_by_action_in): the
    value at the position itself, or quantile_cont of the two values around it at the position's
    fraction `d`, which interpolates them with quantile_cont's own arithmetic (all in one query)."""
    between: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
    for r in records:
        for points_column, names in _QUANTILES:
            points = r.pop(points_column) or [None] * len(names)
            for name, point in zip(names, points, strict=True):
                if point is None:
                    r[name] = None
                elif point["d"] == 0:
                    r[name] = float(point["lo"])
                else:
                    between.append((r, name, point))
    if not between:
        return
    # The aggregate over each pair's list: quantile_cont's own code, a third of the time of
    # filtered aggregates over a VALUES table. A DOUBLE from its shortest repr parses back to
    # the same bits.
    interpolated = ", ".join(
        f"list_aggregate([{p['lo']}, {p['hi']}]::BIGINT[], 'quantile_cont', '{p['d']!r}'::DOUBLE)"
        for _, _, p in between
    )
    _, rows = execute(con, f"SELECT {interpolated}")
    for (r, name, _), value in zip(between, rows[0], strict=True):
        r[name] = value


def _latest_at(con: duckdb.DuckDBPyConnection, instant: dt.datetime, projects: str) -> bool:
    """Whether a latest state of `projects` (a list literal) was created at `instant`, an
    extreme of the window (a one-microsecond window: a day's rows at most are read)."""
    narrow = (
        f"since := {timestamp_literal(instant)}, "
        f"until := {timestamp_literal(instant + dt.timedelta(microseconds=1))}, "
        f"projects := {projects}"
    )
    _, rows = execute(con, f"SELECT count(*) FROM report_operations({narrow})")
    return bool(rows[0][0])


def picker(columns: Sequence[str], names: Sequence[str]) -> Callable[[tuple[Any, ...]], Any]:
    """A row of `columns` to the dict of `names` (no dict of every column first)."""
    get = itemgetter(*(list(columns).index(c) for c in names))
    return lambda row: dict(zip(names, get(row)))


# report_problems_top's n is at most this less one (DuckDB's min_by with n).
_TOP_MAX = 1_000_000


class Problems(NamedTuple):
    failing: list[dict[str, Any]]  # oldest first (the oldest `top` with a `top`)
    stuck: list[dict[str, Any]]
    stuck_failing: int  # failing ones older than `stuck_after`
    failing_total: int  # how many are failing (the list's length without a `top`)
    stuck_total: int


def problems(
    con: duckdb.DuckDBPyConnection, when: str, names: Sequence[str], top: int | None = None
) -> Problems:
    """The operations failing now and the stuck ones of ROWS (`report_problems_in`; `when`:
    its as_of and stuck_after arguments), oldest first, as dicts of `names`
    (report.FAILING_COLUMNS, "age" last), and how many of the failing ones are older than
    `stuck_after`. `top`: only the oldest `top` of each list are fetched, with the lists'
    lengths (`report_problems_top`, one aggregate: a terminal shows 10 of 195k at 10M
    operations; fetching them all cost ~0.5 s, a top-N of each and a count 0.15 s)."""
    every = top is None or top >= _TOP_MAX  # min_by takes n below a million: every row, cut
    relation = (
        f"report_problems_in({ROWS}, {when})"
        if every
        else f"report_problems_top({ROWS}, {int(top or 0)}, {when})"
    )
    # Ages as microseconds (not a timedelta per row), rounded as timedelta.total_seconds() does.
    columns, rows = execute(con, f"SELECT * EXCLUDE (age), epoch_us(age) AS age_us FROM {relation}")
    pick = picker(columns, names[:-1])  # "age" last: it is added last
    kind, old, age = columns.index("kind"), columns.index("old"), columns.index("age_us")
    lists: dict[str, list[dict[str, Any]]] = {"failing": [], "stuck": []}
    stuck_failing = 0
    for row in rows:
        r = pick(row)
        r["age"] = dt.timedelta(seconds=round(row[age] / 1_000_000))  # read, not computed with
        lists[row[kind]].append(r)
        stuck_failing += row[kind] == "failing" and bool(row[old])
    failing, stuck = lists["failing"], lists["stuck"]
    if every:
        return Problems(failing[:top], stuck[:top], stuck_failing, len(failing), len(stuck))
    # Every row of a list carries its length and how many of its rows are old.
    total, old_total = columns.index("total"), columns.index("old_total")
    counts = {row[kind]: (row[total], row[old_total]) for row in rows}
    failing_total, stuck_failing = counts.get("failing", (0, 0))
    return Problems(failing, stuck, stuck_failing, failing_total, counts.get("stuck", (0, 0))[0])


# A \\u escape with an upper-case hex digit: to_json writes the control characters U+000B,
# U+000E, U+000F and U+001A to U+001F so (orjson in lower case), and a text holding a backslash
# and "u000B" has the same characters escaped.
_UPPER_ESCAPE = re.compile(rb"\\u00(?:0[BEF]|1[A-F])")


def problems_json(
    con: duckdb.DuckDBPyConnection, when: str
) -> tuple[tuple[bytes, bytes], int] | None:
    """The failing and stuck lists of `problems` as `format.json_bytes` writes them in the
    report's JSON (a list at depth 1: objects indented by four, then `  ]`), each object
    written by DuckDB (`report_problems_json`), and how many failing ones are old. None where a
    text holds a character to_json escapes other than orjson (or what could be one): then the
    caller builds the rows."""
    _, rows = execute(con, f"SELECT kind, old, line FROM report_problems_json({ROWS}, {when})")
    failing = [line for kind, _, line in rows if kind == "failing"]
    stuck = [line for kind, _, line in rows if kind != "failing"]
    stuck_failing = sum(1 for kind, old, _ in rows if kind == "failing" and old)
    del rows
    lists = (_json_list(failing), _json_list(stuck))
    if any(b"\\u00" in text and _UPPER_ESCAPE.search(text) for text in lists):
        return None
    return lists, stuck_failing


def _json_list(objects: list[bytes]) -> bytes:
    """A list of JSON objects at depth 1 as orjson's two-space indent writes it (one copy)."""
    if not objects:
        return b"[]"
    objects[0] = b"[\n" + objects[0]
    objects[-1] += b"\n  ]"
    return b",\n".join(objects)


def freshness(con: duckdb.DuckDBPyConnection, as_of: dt.datetime) -> dict[str, Any]:
    """When the trail was last known current (`core.model.last_current`, as `check` says: the
    last run with outcome ok, or after budgeted or interrupted runs the oldest project's last
    completed walk) and its lag at `as_of`; the newest run of any outcome and how many of its
    projects it completed. Over several datasets, the least fresh one's (`dataset`: its data
    dir; a dataset whose sync stopped must not hide behind the others')."""
    columns, _ = execute(con, "SELECT * FROM sync_runs LIMIT 0")
    several = "dataset" in columns
    dataset = "dataset" if several else "NULL"
    runs = fetch_records(
        con,
        f"SELECT {dataset} AS dataset, started_at, finished_at, outcome, projects_ok, "
        "projects_total "
        # A killed run never finished, but it is the last run (as `status` and `check` say);
        # one under way is not judged.
        "FROM sync_runs WHERE finished_at IS NOT NULL OR outcome = 'killed' "
        "ORDER BY coalesce(finished_at, started_at)",
    )
    labels = sorted({r["dataset"] for r in runs}) or [None]
    if several:  # a dataset that never finished a run is the least fresh of all
        _, found = execute(con, "SELECT DISTINCT dataset FROM projects")
        labels = sorted({*labels, *(d for (d,) in found)} - {None}) or [None]
    stalest: dict[str, Any] | None = None
    for label in labels:
        own = [r for r in runs if r["dataset"] == label]
        current = last_current(
            [(r["outcome"], r["started_at"], r["finished_at"]) for r in own if r["finished_at"]],
            _live_projects(con, label),
        )
        last = own[-1] if own else {}
        entry = {
            "last_success_at": current,
            "lag": None
            if current is None
            else dt.timedelta(seconds=round((as_of - current).total_seconds())),
            # When it ended; a killed run's when it started (it never finished).
            "last_run_at": last.get("finished_at") or last.get("started_at"),
            "last_run_outcome": last.get("outcome"),
            "last_run_projects_ok": last.get("projects_ok"),
            "last_run_projects": last.get("projects_total"),
        }
        if several:
            entry["dataset"] = label
        if stalest is None or _staler(entry, stalest):
            stalest = entry
    assert stalest is not None
    return stalest


def _live_projects(
    con: duckdb.DuckDBPyConnection, label: str | None
) -> list[tuple[dt.datetime | None, dt.datetime | None]]:
    """Each live project's `current_at` (its last walk, or a listing that showed it idle) and
    `first_seen_at`: which runs made the whole trail current (`core.model.last_current`)."""
    where = "deleted_at IS NULL" + ("" if label is None else " AND dataset = ?")
    _, rows = execute(
        con,
        f"SELECT current_at, first_seen_at FROM projects WHERE {where}",
        None if label is None else [label],
    )
    return [(r[0], r[1]) for r in rows]


def _staler(entry: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    if entry["last_success_at"] is None or than["last_success_at"] is None:
        return entry["last_success_at"] is None and than["last_success_at"] is not None
    return bool(entry["last_success_at"] < than["last_success_at"])


# Lines of "start_compute failed 4 times on `preview/pr-42` (br-...)" in the headline.
HEADLINE_BRANCHES = 3
# Which rows of report_failure_groups_* the report keeps, each in its list: every project,
# the branches (not the operations that name none) and the pairs of branch and action that
# failed; the lists' order (report_failure_rollup's within each grain).
_GROUP_KEPT = "grain = 'project' OR (branch_id IS NOT NULL AND (grain = 'branch' OR failed <> 0))"
_GROUP_ORDER = "failed DESC, operations DESC, project_id, branch_id, action"


def failure_groups(
    con: duckdb.DuckDBPyConnection,
    relation: str,
    lists: Mapping[str, tuple[str, Sequence[str]]],
    top: int | None = None,
) -> dict[str, Any]:
    """Failures per project, per branch, and per branch and action that failed: one query
    (`relation`, report_failure_groups_in or _scan, rolls them up over its few groups), each
    grain's rows as dicts of its columns in its list (`lists`: grain -> list, columns).
    `top`: each list's first `top` rows (the branch and action pairs: the headline's
    HEADLINE_BRANCHES at least) and its length (58k rows at 10M operations, of which a
    terminal shows 10: fetching them all cost ~0.06 s)."""
    select = f"SELECT * FROM {relation} WHERE {_GROUP_KEPT}"
    if top is not None:
        top = int(top)
        shown = f"CASE grain WHEN 'branch_action' THEN {max(top, HEADLINE_BRANCHES)} ELSE {top} END"
        select = (
            f"SELECT * FROM (SELECT *, row_number() OVER (PARTITION BY grain ORDER BY "
            f"{_GROUP_ORDER}) AS shown_rank, count(*) OVER (PARTITION BY grain) AS total "
            f"FROM ({select})) WHERE shown_rank <= {shown} ORDER BY grain, shown_rank"
        )
    columns, rows = execute(con, select)
    grain = columns.index("grain")
    pickers = {kind: picker(columns, names) for kind, (_, names) in lists.items()}
    found: dict[str, Any] = {name: [] for name, _ in lists.values()}
    for row in rows:
        found[lists[row[grain]][0]].append(pickers[row[grain]](row))
    if top is not None:
        total = columns.index("total")
        counts = {row[grain]: row[total] for row in rows}
        for kind, (name, _) in lists.items():
            found[f"{name}_total"] = counts.get(kind, 0)
    return found


def fetch_records(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    columns, rows = execute(con, sql)
    return [dict(zip(columns, row)) for row in rows]
