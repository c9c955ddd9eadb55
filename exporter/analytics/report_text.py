"""The report in words: text and markdown (the headline, then each table), csv and json.

`render_report` is what `opsaudit report` and the demo print; the data comes from
`report.build_report`.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Sequence
from typing import Any

from exporter.analytics.format import SECTIONS, format_duration, json_bytes, jsonable, render
from exporter.analytics.report import (
    BRANCH_COLUMNS,
    DURATION_COLUMNS,
    ERROR_COLUMNS,
    FAILING_COLUMNS,
    FAILURE_COLUMNS,
    MIX_COLUMNS,
    ON_CALL_SHOWN,
    PROJECT_COLUMNS,
    SMALL_N,
    STUCK_COLUMNS,
    Report,
    branch_failure_text,
    describe_window,
    empty_message,
    with_branch,
)

__all__ = ["SECTIONS", "TOP_ROWS", "freshness_text", "render_report", "report_json"]

# Rows per table of the report in a terminal; json, csv and markdown keep every row (issue 15).
TOP_ROWS = 10


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


def _span(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds and seconds % size == 0:
            n = seconds // size
            return f"{n} {unit}{'' if n == 1 else 's'}"
    return f"{seconds} s"


def _instant(value: dt.datetime | None) -> str:
    return "-" if value is None else str(jsonable(value.replace(microsecond=0)))


def _ms(value: float) -> str:
    return f"{value:,.0f} ms"


def _n(n: int) -> str:
    """` (n=24)` after a figure that rests on few operations; nothing when there are enough."""
    return f" (n={n:,})" if n < SMALL_N else ""


def freshness_text(report: Report) -> str:
    """How fresh the data is, in words: the last successful sync and its lag, the last run
    (over several datasets, the least fresh one's)."""
    f = report.freshness
    if f.get("last_success_at") is None:
        text = "no successful sync yet"
    else:
        text = (
            f"last successful sync {_instant(f['last_success_at'])}, "
            f"{format_duration(f['lag'])} before this report"
        )
    if f.get("last_run_at") is not None and f["last_run_at"] != f.get("last_success_at"):
        started = " started" if f["last_run_outcome"] == "killed" else ""  # it never finished
        text += f"; last run{started} {_instant(f['last_run_at'])}: {f['last_run_outcome']}"
    # A killed run's figures are those of its last commit, if any: not what it did.
    if f.get("last_run_projects") is not None and f.get("last_run_outcome") != "killed":
        text += f" ({f['last_run_projects_ok'] or 0:,} of {f['last_run_projects']:,} projects)"
    if f.get("dataset") is not None:  # several datasets: the least fresh one's
        text = f"least fresh dataset {f['dataset']}: {text}"
    return text


def _headline(report: Report, fmt: str) -> str:
    """The block above the tables: how fresh, what is in scope, how bad, where to look first."""
    h = report.headline()
    most = ", ".join(f"{r['action']} {r['failed']:,}" for r in h["most_failures"]) or "none"
    slowest = h["slowest_p90"]
    stuck = (
        f"{h['stuck']:,} still running or waiting, not terminal {_span(h['stuck_after'])} "
        "after creation"
    )
    if h["stuck_failing"]:
        stuck += f" (and {h['stuck_failing']:,} failing, counted above)"
    lines = [
        ("Data", freshness_text(report)),
        (
            "Operations",
            f"{h['operations']:,}, created {_instant(h['first_created_at'])} to "
            f"{_instant(h['last_created_at'])}",
        ),
        (
            "Failure rate",
            f"{100 * h['failure_rate']:.1f} % ({h['failed']:,} failed at least once; "
            f"{h['retries']:,} retries){_n(h['operations'])}",
        ),
        ("Failing now", f"{h['failing_now']:,} (latest status failed or error)"),
        ("Stuck", stuck),
        ("Most failures", most),
        (
            "By branch",
            "; ".join(branch_failure_text(r) for r in h["most_failures_by_branch"]) or "none",
        ),
        (
            "Slowest (p90)",
            f"{slowest['action']} {_ms(slowest['p90_ms'])}{_n(slowest['n'])}"
            if slowest
            else "none (no durations)",
        ),
    ]
    return _block(lines, fmt)


def _block(lines: list[tuple[str, str]], fmt: str) -> str:
    """Named lines: a markdown list, or names padded to one column in a terminal."""
    if fmt == "markdown":
        return "".join(f"- **{name}**: {value}\n" for name, value in lines)
    width = max(len(name) for name, _ in lines)
    return "".join(f"{name.ljust(width)}  {value}\n" for name, value in lines)


def _table_top(
    columns: Sequence[str], rows: list[tuple[Any, ...]], top: int | None, total: int | None = None
) -> str:
    """A terminal table of the first `top` rows, saying how many more there are of `total`
    (default: `rows` are all of them)."""
    total = len(rows) if total is None else total
    if top is None or total <= top:
        return render(columns, rows, "table", thousands=True)
    shown = render(columns, rows[:top], "table", thousands=True).rstrip("\n").rsplit("\n", 1)[0]
    more = total - top
    return f"{shown}\n({top:,} of {total:,} rows; {more:,} more with --all or --top N)\n"


def _human(report: Report, fmt: str, top: int | None = None) -> str:
    report.check_lists(top if fmt == "table" else None)
    heading = (lambda t: f"## {t}\n\n") if fmt == "markdown" else (lambda t: f"{t}\n")
    title = f"{report.operations:,} operations ({describe_window(report)})"
    out = [
        f"# opsaudit report: {title}\n\n" if fmt == "markdown" else f"opsaudit report: {title}\n"
    ]
    out.append("" if fmt == "markdown" else "\n")
    if report.operations == 0:
        # Still how fresh (PRODUCT.md: every format): an empty window may be a sync that stopped.
        out.append(_block([("Data", freshness_text(report))], fmt))
        out.append("\n" + empty_message(report) + "\n")
        return "".join(out)
    out.append(_headline(report, fmt))
    totals = report.totals()
    for name, columns, rows, cut in _tables(report):
        out.append("\n" + heading(name))
        if fmt == "table":
            out.append(_table_top(columns, _section_rows(rows, columns), top, totals.get(cut)))
        else:
            out.append(render(columns, _section_rows(rows, columns), fmt, thousands=True))
    return "".join(out)


def _tables(report: Report) -> list[tuple[str, list[str], list[dict[str, Any]], str]]:
    """The tables below the headline: title, columns, rows and the name of the report's list
    where `build_report(top=N)` may have cut it ("" where it cuts none)."""
    rate = [c if c != "failure_rate" else "failure_rate_%" for c in FAILURE_COLUMNS]
    project_rate = [c if c != "failure_rate" else "failure_rate_%" for c in PROJECT_COLUMNS]
    share = [c if c != "share" else "share_%" for c in MIX_COLUMNS]
    branch_rate = ["branch", *project_rate]
    return [
        (
            "Failing now (latest status failed or error), oldest first",
            list(ON_CALL_SHOWN),
            with_branch(report.failing_operations, "branch_deleted_at"),
            "failing_operations",
        ),
        (
            f"Stuck: still running or waiting {_span(report.stuck_after)} after creation, "
            "oldest first",
            list(ON_CALL_SHOWN),
            with_branch(report.stuck_operations, "branch_deleted_at"),
            "stuck_operations",
        ),
        ("Top error texts (operations that reported each)", list(ERROR_COLUMNS), report.errors, ""),
        (
            "Failures per project",
            project_rate,
            _percent(report.projects, "failure_rate"),
            "projects",
        ),
        (
            "Failures per branch (latest name; deleted: no longer listed)",
            branch_rate,
            _percent(with_branch(report.branches), "failure_rate"),
            "branches",
        ),
        (
            "Failures per action (failed = failed at least once; failing_now = status failed or "
            "error)",
            rate,
            _percent(report.failures, "failure_rate"),
            "",
        ),
        (
            "Durations of terminal operations in ms (total_duration_ms; wall = updated_at - "
            "created_at)",
            list(DURATION_COLUMNS),
            _whole_ms(report.durations),
            "",
        ),
        ("Action mix", share, _percent(report.action_mix, "share"), ""),
    ]


def _whole_ms(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    # Whole milliseconds on a terminal: the interpolated percentiles' fractions are noise.
    return [
        {k: round(v) if isinstance(v, float) and math.isfinite(v) else v for k, v in r.items()}
        for r in rows
    ]


def _sections(report: Report) -> list[tuple[str, list[dict[str, Any]], Sequence[str]]]:
    return [
        ("failing", report.failing_operations, FAILING_COLUMNS),
        ("stuck", report.stuck_operations, STUCK_COLUMNS),
        ("errors", report.errors, ERROR_COLUMNS),
        ("projects", report.projects, PROJECT_COLUMNS),
        ("branches", report.branches, BRANCH_COLUMNS),
        ("failures", report.failures, FAILURE_COLUMNS),
        ("durations", report.durations, DURATION_COLUMNS),
        ("action_mix", report.action_mix, MIX_COLUMNS),
    ]


# How fresh the data is (report_figures.freshness), as json names it; `dataset` (the least
# fresh one's data dir) only over several datasets, as in json.
FRESHNESS_COLUMNS = (
    "last_success_at",
    "lag",
    "last_run_at",
    "last_run_outcome",
    "last_run_projects_ok",
    "last_run_projects",
)


def _csv(report: Report, section: str | None = None) -> str:
    report.check_lists()
    fresh = (*FRESHNESS_COLUMNS, *(("dataset",) if "dataset" in report.freshness else ()))
    tables = [("freshness", [report.freshness], fresh), *_sections(report)]
    if section is not None:
        # One table with its own columns, for a spreadsheet or a script.
        records, columns = next((r, c) for name, r, c in tables if name == section)
        return render(columns, [tuple(r.get(c) for c in columns) for r in records], "csv")
    # One table for spreadsheets: a section column, then every section's columns. Freshness's
    # row first (as the headline's line), its columns last: the others keep their places.
    others = dict.fromkeys(c for _, _, cols in tables[1:] for c in cols)
    all_columns = ["section", *others, *fresh]
    rows: list[tuple[Any, ...]] = []
    for name, records, _ in tables:
        rows += [(name, *(r.get(c) for c in all_columns[1:])) for r in records]
    return render(all_columns, rows, "csv")


def render_report(
    report: Report, fmt: str, *, top: int | None = None, section: str | None = None
) -> str:
    """The report as table, markdown, csv or json (one object: headline, failures, durations,
    action_mix). A headline block comes first; `top` cuts each table of the `table` format to
    that many rows (None: every row); the other formats always keep every row."""
    if fmt == "json":
        return report_json(report).decode()
    if fmt == "csv":
        return _csv(report, section)
    if fmt in ("table", "markdown"):
        return _human(report, fmt, top)
    raise ValueError(f"unknown report format {fmt!r}")


def report_json(report: Report) -> bytes:
    """`render_report(report, "json")` as UTF-8, as orjson writes it, not decoded and encoded
    again (79 MB at 10M operations: `opsaudit report --format json` writes these bytes)."""
    return json_bytes(report.fields(), indent=True, newline=True)
