"""The report (failures, durations, action mix per action) as data, and its renderings."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb
import orjson

from exporter._errors import ConfigError
from exporter._format import jsonable, render
from exporter._sql import execute
from exporter._timeutil import parse_rfc3339

__all__ = [
    "DURATION_COLUMNS",
    "FAILURE_COLUMNS",
    "MIX_COLUMNS",
    "REPORT_SQL",
    "Report",
    "build_report",
    "empty_message",
    "parse_since",
    "parse_until",
    "render_report",
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
# The .sql files the report needs: `connect(data_dir, only=REPORT_SQL)` skips binding the rest.
REPORT_SQL = ("00_base.sql", "90_report.sql")

_RELATIVE = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_DATE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\s*$")


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

    def as_dict(self) -> dict[str, Any]:
        """The JSON shape: window, operations, then the three sections."""
        return {
            "since": jsonable(self.since),
            "until": jsonable(self.until),
            "projects": self.project_ids,
            "operations": self.operations,
            "failures": [{k: jsonable(v) for k, v in row.items()} for row in self.failures],
            "durations": [{k: jsonable(v) for k, v in row.items()} for row in self.durations],
            "action_mix": [{k: jsonable(v) for k, v in row.items()} for row in self.action_mix],
        }


def _parse_point(text: str, *, now: dt.datetime | None, end_of_day: bool) -> dt.datetime:
    now = now or dt.datetime.now(dt.timezone.utc)
    m = _RELATIVE.match(text)
    if m:
        return now - dt.timedelta(**{_UNITS[m[2]]: int(m[1])})
    if _DATE.match(text):
        try:
            day = dt.date.fromisoformat(text.strip())
        except ValueError as exc:
            raise ConfigError(f"{text!r} is not a valid date") from exc
        start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        return start + dt.timedelta(days=1) if end_of_day else start
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise ConfigError(
            f"{text!r} is not a time: use a duration back from now (7d, 24h, 30m, 2w), "
            "a date (2025-01-31) or an RFC 3339 time (2025-01-31T12:00:00Z)"
        ) from exc


def parse_since(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """`7d`/`24h`/`30m`/`2w` back from now, a date (its midnight UTC), or an RFC 3339 time."""
    return _parse_point(text, now=now, end_of_day=False)


def parse_until(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """Like `parse_since`, but a date includes that whole day (the bound is exclusive)."""
    return _parse_point(text, now=now, end_of_day=True)


def _timestamp_literal(value: dt.datetime | None) -> str:
    if value is None:
        return "NULL"
    if value.tzinfo is None:
        raise ValueError("report bounds must be timezone-aware datetimes")
    utc = value.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")
    return f"TIMESTAMPTZ '{utc}+00'"


def _string_list_literal(values: Sequence[str] | None) -> str:
    if values is None:
        return "NULL"
    quoted = ", ".join("'" + v.replace("'", "''") + "'" for v in values)
    return f"[{quoted}]::VARCHAR[]"


def build_report(
    con: duckdb.DuckDBPyConnection,
    *,
    since: dt.datetime | None = None,
    until: dt.datetime | None = None,
    project_ids: Sequence[str] | None = None,
) -> Report:
    """Compute the report on a connection from `exporter.connect()`, in one pass over the data."""
    projects = list(project_ids) if project_ids else None
    # Literals, not prepared parameters: the planner folds them, so the window prunes Hive
    # partitions and row groups (a parameter is unknown when the plan is made).
    sql = (
        "SELECT * FROM report_by_action("
        f"since := {_timestamp_literal(since)}, until := {_timestamp_literal(until)}, "
        f"projects := {_string_list_literal(projects)})"
    )
    columns, rows = execute(con, sql)
    records = [dict(zip(columns, row)) for row in rows]
    failures = sorted(records, key=lambda r: (-r["failed"], -r["operations"], r["action"]))
    durations = [
        {"action": r["action"], "operations": r["terminal"]}
        | {c: r[c] for c in DURATION_COLUMNS[2:]}
        for r in records
        if r["terminal"]
    ]
    durations.sort(key=lambda r: (-r["operations"], r["action"]))
    return Report(
        since=since,
        until=until,
        project_ids=projects,
        operations=sum(r["operations"] for r in records),
        failures=[{c: r[c] for c in FAILURE_COLUMNS} for r in failures],
        durations=durations,
        action_mix=[{c: r[c] for c in MIX_COLUMNS} for r in records],
    )


def _describe_window(report: Report) -> str:
    parts = []
    if report.since is not None:
        parts.append(f"since {jsonable(report.since)}")
    if report.until is not None:
        parts.append(f"until {jsonable(report.until)}")
    if report.project_ids:
        parts.append(f"project {', '.join(report.project_ids)}")
    return "; ".join(parts) if parts else "all time, all projects"


def empty_message(report: Report) -> str:
    """What to say when the report has no operations."""
    if report.since is None and report.until is None and not report.project_ids:
        return "No operations in the dataset yet: run `opsaudit sync` first."
    return f"No operations match ({_describe_window(report)})."


def _percent(rows: list[dict[str, Any]], column: str) -> list[dict[str, Any]]:
    # A terminal reads "4.1 %" more easily than 0.0412; json and csv keep the fraction.
    return [
        {
            (f"{k}_%" if k == column else k): (
                (None if v is None else round(100 * v, 1)) if k == column else v
            )
            for k, v in row.items()
        }
        for row in rows
    ]


def _section_rows(rows: list[dict[str, Any]], columns: Sequence[str]) -> list[tuple[Any, ...]]:
    return [tuple(r.get(c) for c in columns) for r in rows]


def _human(report: Report, fmt: str) -> str:
    heading = (lambda t: f"## {t}\n\n") if fmt == "markdown" else (lambda t: f"{t}\n")
    title = f"{report.operations:,} operations ({_describe_window(report)})"
    out = [
        f"# opsaudit report: {title}\n\n" if fmt == "markdown" else f"opsaudit report: {title}\n"
    ]
    if report.operations == 0:
        out.append("\n" + empty_message(report) + "\n")
        return "".join(out)
    rate = [c if c != "failure_rate" else "failure_rate_%" for c in FAILURE_COLUMNS]
    share = [c if c != "share" else "share_%" for c in MIX_COLUMNS]
    sections = [
        (
            "Failures (failed = failed at least once; failing_now = status failed or error)",
            rate,
            _percent(report.failures, "failure_rate"),
        ),
        (
            "Durations of terminal operations in ms (total_duration_ms; wall = updated_at - "
            "created_at)",
            list(DURATION_COLUMNS),
            report.durations,
        ),
        ("Action mix", share, _percent(report.action_mix, "share")),
    ]
    for name, columns, rows in sections:
        out.append("\n" + heading(name))
        out.append(render(columns, _section_rows(rows, columns), fmt))
    return "".join(out)


def _csv(report: Report) -> str:
    # One table for spreadsheets: a section column, then every section's columns.
    columns = ["section", *dict.fromkeys([*FAILURE_COLUMNS, *DURATION_COLUMNS, *MIX_COLUMNS])]
    rows: list[tuple[Any, ...]] = []
    for section, records in (
        ("failures", report.failures),
        ("durations", report.durations),
        ("action_mix", report.action_mix),
    ):
        rows += [(section, *(r.get(c) for c in columns[1:])) for r in records]
    return render(columns, rows, "csv")


def render_report(report: Report, fmt: str) -> str:
    """The report as table, markdown, csv or json (one object: failures, durations, action_mix)."""
    if fmt == "json":
        return orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    if fmt == "csv":
        return _csv(report)
    if fmt in ("table", "markdown"):
        return _human(report, fmt)
    raise ValueError(f"unknown report format {fmt!r}")
