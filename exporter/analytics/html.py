"""The report as one self-contained HTML page: the headline tables and five charts.

Charting library: plotly. `plotly.offline.get_plotlyjs()` hands us the whole plotly.js bundle
from the Python wheel, so the page embeds it once, inline, and opens from `file://` with no
network, no CDN and no extra binary. altair (Vega-Lite) was the other candidate: its inline
data is as good, but an offline page needs the vega, vega-lite and vega-embed scripts inline
too, which altair only does through `vl-convert-python` (a ~30 MB native wheel) or by our
shipping the scripts ourselves. plotly builds figures from plain lists (no pandas needed), and
its import is lazy here, so nothing but `report --format html` and the demo pays for it. The
cost is the page size: about 5 MB, nearly all of it plotly.js.

Every number comes from the SQL layer over the same window as the text report
(`report_operations(since, until, projects)` in sql/90_report.sql), with the vocabulary of
sql/00_base.sql (`is_terminal`) and sql/10_failures.sql (failed = failures_count > 0).
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Sequence
from typing import Any

from exporter.analytics.format import jsonable, readable_interval, text
from exporter.analytics.report import (
    BRANCH_COLUMNS,
    DURATION_COLUMNS,
    ERROR_COLUMNS,
    FAILURE_COLUMNS,
    MIX_COLUMNS,
    ON_CALL_SHOWN,
    PROJECT_COLUMNS,
    SMALL_N,
    Report,
    branch_failure_text,
    empty_message,
    window_parts,
    with_branch,
)
from exporter.analytics.report_text import freshness_text
from exporter.analytics.views import execute
from exporter.core.duck import duckdb

__all__ = ["CHARTS", "HTML_SQL", "render_html"]

# The .sql files the page needs (`connect(data_dir, only=HTML_SQL)`).
HTML_SQL = ("00_base.sql", "90_report.sql")
# The chart ids, in page order: each is a `<div id="chart-...">` (the browser test's handle).
CHARTS = ("failure-rate", "durations", "action-mix", "stuck-retried", "compute-start")
# Lines and stacks beyond this many actions are unreadable: the busiest ones are drawn and the
# rest summed as "other" (the tables above the charts list every action).
TOP_ACTIONS = 8
# Rows of each on-call table on the page (the oldest first).
TOP_ROWS = 20
# An action with fewer operations than this per day (on average over its days) swings between
# 0 and 20 % on a handful of failures: its line is drawn grey, behind the overall one (issue 23).
LOW_VOLUME_PER_DAY = 20
LOW_VOLUME_COLOUR = "#c8c8c8"


def _literal(value: dt.datetime | None) -> str:
    if value is None:
        return "NULL"
    return f"TIMESTAMPTZ '{value.astimezone(dt.timezone.utc).strftime('%Y-%m-%d %H:%M:%S.%f')}+00'"


def _window(report: Report) -> str:
    projects = (
        "NULL"
        if report.project_ids is None
        else "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in report.project_ids) + "]"
    )
    return (
        f"since := {_literal(report.since)}, until := {_literal(report.until)}, "
        f"projects := {projects}"
    )


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    columns, rows = execute(con, sql)
    return [dict(zip(columns, r)) for r in rows]


def _top_actions(report: Report) -> list[str]:
    return [r["action"] for r in report.action_mix[:TOP_ACTIONS]]


def _figures(con: duckdb.DuckDBPyConnection, report: Report, as_of: dt.datetime) -> dict[str, Any]:
    import plotly.graph_objects as go

    ops = f"report_operations({_window(report)})"
    top = _top_actions(report)
    layout = {
        "template": "plotly_white",
        "height": 420,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 50},
        "legend": {"orientation": "h", "y": -0.2},
        # Margins grow to fit tick labels and legends: no label is clipped.
        "xaxis": {"automargin": True},
        "yaxis": {"automargin": True},
    }
    figures: dict[str, Any] = {}

    # 1. Failure rate over time, per action (daily; failed = failed at least once).
    daily = _rows(
        con,
        "SELECT created_date AS day, action, count(*) AS operations, "
        "count(*) FILTER (WHERE is_failed(failures_count)) AS failed "
        f"FROM {ops} GROUP BY ALL ORDER BY day, action",
    )
    fig = go.Figure(
        layout={
            **layout,
            "title": "Failure rate per day (failed at least once); grey: fewer than "
            f"{LOW_VOLUME_PER_DAY} operations a day",
        }
    )
    days = sorted({r["day"] for r in daily})
    overall = {d: [0, 0] for d in days}
    for r in daily:
        overall[r["day"]][0] += r["operations"]
        overall[r["day"]][1] += r["failed"]
    fig.add_trace(
        go.Scatter(
            x=[d.isoformat() for d in days],
            y=[overall[d][1] / overall[d][0] for d in days],
            name="all actions",
            mode="lines+markers",
            line={"color": "#222222", "width": 3},
        )
    )
    for action in top:
        points = [r for r in daily if r["action"] == action]
        low = sum(r["operations"] for r in points) / len(points) < LOW_VOLUME_PER_DAY
        fig.add_trace(
            go.Scatter(
                x=[r["day"].isoformat() for r in points],
                y=[r["failed"] / r["operations"] for r in points],
                name=f"{action} (low volume)" if low else action,
                mode="lines+markers",
                **({"line": {"color": LOW_VOLUME_COLOUR, "width": 1}} if low else {}),
            )
        )
    fig.update_yaxes(tickformat=".1%", rangemode="tozero")
    _mark_partial_days(fig, days, report, as_of)
    figures["failure-rate"] = fig

    # 2. Duration percentiles per action (terminal operations, total_duration_ms).
    durations = report.durations[: TOP_ACTIONS * 2]
    fig = go.Figure(
        layout={**layout, "title": "Duration percentiles of terminal operations (ms, log)"}
    )
    for column, label in (("p50_ms", "p50"), ("p90_ms", "p90"), ("p99_ms", "p99")):
        fig.add_trace(
            go.Bar(
                x=[r["action"] for r in durations],
                y=[r[column] for r in durations],
                name=label,
            )
        )
    fig.update_layout(barmode="group")
    fig.update_yaxes(type="log")
    figures["durations"] = fig

    # 3. Action mix over time (daily counts, stacked; the rest summed as "other").
    fig = go.Figure(layout={**layout, "title": "Action mix per day", "barmode": "stack"})
    for action in [*top, "other"]:
        counts = dict.fromkeys(days, 0)
        for r in daily:
            if r["action"] == action or (action == "other" and r["action"] not in top):
                counts[r["day"]] += r["operations"]
        if any(counts.values()):
            fig.add_trace(
                go.Bar(x=[d.isoformat() for d in days], y=list(counts.values()), name=action)
            )
    _mark_partial_days(fig, days, report, as_of)
    figures["action-mix"] = fig

    # 4. Stuck and retried operations per action: stuck as the page's count and list say it
    # (not failing, and --stuck-after), or the bars and the headline disagree.
    after = f"INTERVAL '{int(report.stuck_after.total_seconds() * 1_000_000)} microseconds'"
    per_action = _rows(
        con,
        "SELECT action, count(*) FILTER (WHERE "
        f"report_is_stuck(status, created_at, {_literal(as_of)}, {after})) AS stuck, "
        "count(*) FILTER (WHERE is_failed(failures_count)) AS retried "
        f"FROM {ops} GROUP BY action HAVING stuck > 0 OR retried > 0 "
        "ORDER BY stuck + retried DESC, action",
    )[: TOP_ACTIONS * 2]
    fig = go.Figure(
        layout={
            **layout,
            "title": f"Stuck (not terminal nor failing {_duration(report.stuck_after)} after "
            "creation) and retried (failed at least once) operations",
            "barmode": "group",
        }
    )
    for column in ("stuck", "retried"):
        fig.add_trace(
            go.Bar(
                x=[r["action"] for r in per_action],
                y=[r[column] for r in per_action],
                name=column,
            )
        )
    figures["stuck-retried"] = fig

    # 5. Compute start latency per day (finished start_compute, total_duration_ms).
    latency = _rows(
        con,
        "SELECT created_date AS day, "
        "quantile_cont(total_duration_ms, [0.5, 0.9, 0.99]) AS q, count(*) AS operations "
        f"FROM {ops} WHERE action = 'start_compute' AND status = 'finished' "
        "AND total_duration_ms IS NOT NULL GROUP BY day ORDER BY day",
    )
    fig = go.Figure(layout={**layout, "title": "Compute start latency per day (ms, log)"})
    for i, label in enumerate(("p50", "p90", "p99")):
        fig.add_trace(
            go.Scatter(
                x=[r["day"].isoformat() for r in latency],
                y=[r["q"][i] for r in latency],
                name=label,
                mode="lines+markers",
            )
        )
    # A log axis: p99 would flatten p50 and p90 against the axis on a linear one.
    fig.update_yaxes(type="log")
    _mark_partial_days(fig, [r["day"] for r in latency], report, as_of)
    figures["compute-start"] = fig
    return figures


def partial_days(days: Sequence[dt.date], report: Report, as_of: dt.datetime) -> list[dt.date]:
    """The first and last of `days` when the window covers only part of them: the history
    (or --since) starts after the first one's midnight, or it ends (--until, or now) before
    the last one's end. Their counts are not comparable with whole days'."""
    if not days:
        return []
    first, last = min(days), max(days)
    start = report.since or report.first_created_at
    end = min(report.until, as_of) if report.until is not None else as_of
    out = []
    midnight = dt.datetime(first.year, first.month, first.day, tzinfo=dt.timezone.utc)
    if start is not None and start > midnight:
        out.append(first)
    last_end = dt.datetime(last.year, last.month, last.day, tzinfo=dt.timezone.utc)
    if end < last_end + dt.timedelta(days=1) and last not in out:
        out.append(last)
    return out


def _mark_partial_days(
    fig: Any, days: Sequence[dt.date], report: Report, as_of: dt.datetime
) -> None:
    # One tick a day, named by its date (not 12:00 / 00:00 ticks between the points).
    fig.update_xaxes(type="date", dtick=86_400_000, tickformat="%Y-%m-%d")
    for day in partial_days(days, report, as_of):
        centre = dt.datetime(day.year, day.month, day.day)  # where the day's point is drawn
        fig.add_vrect(
            x0=(centre - dt.timedelta(hours=12)).isoformat(),
            x1=(centre + dt.timedelta(hours=12)).isoformat(),
            fillcolor="#999999",
            opacity=0.12,
            line_width=0,
            layer="below",
            annotation_text="partial day",
            annotation_position="top",
        )


def _table(columns: Sequence[str], rows: Sequence[dict[str, Any]], percent: str) -> str:
    def cell(column: str, value: Any) -> str:
        if value is None:
            return "<td></td>"
        if column == percent:
            return f'<td class="n">{100 * value:.1f} %</td>'
        if isinstance(value, float):
            return f'<td class="n">{value:,.1f}</td>'
        if isinstance(value, int):
            return f'<td class="n">{value:,}</td>'
        if isinstance(value, dt.timedelta):
            return f'<td class="n">{html.escape(readable_interval(value))}</td>'
        wrap = ' class="w"' if column in ("error", "actions") else ""
        return f"<td{wrap}>{html.escape(text(value))}</td>"

    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(cell(c, r.get(c)) for c in columns) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _on_call(report: Report) -> list[str]:
    """What on-call reads first (issue 23): which operations, where, with what error."""
    report.check_lists(TOP_ROWS)
    failing = "Failing now (latest status failed or error), oldest first"
    stuck = "Stuck: still running or waiting, oldest first"
    parts: list[str] = []
    totals = report.totals()
    for title, rows, total in (
        (failing, report.failing_operations, totals["failing_operations"]),
        (stuck, report.stuck_operations, totals["stuck_operations"]),
    ):
        parts += [
            f"<h2>{title}</h2>",
            *_top(ON_CALL_SHOWN, with_branch(rows, "branch_deleted_at"), "", total),
        ]
    return parts


def _top(
    columns: Sequence[str], rows: Sequence[dict[str, Any]], percent: str, total: int | None = None
) -> list[str]:
    """The first `TOP_ROWS` rows, then how many more of `total` (default: `rows` are all of
    them; a page of 3,000 rows is not read)."""
    total = len(rows) if total is None else total
    out = [_table(columns, rows[:TOP_ROWS], percent)]
    if total > TOP_ROWS:
        out.append(
            f'<p class="more">{TOP_ROWS} of {total:,} rows; all of them: '
            "<code>opsaudit report --format json</code> (or <code>--all</code> in a terminal)</p>"
        )
    return out


_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px auto; max-width: 1200px; color: #222; }
h1 { font-size: 22px; } h2 { font-size: 17px; margin-top: 28px; }
table { border-collapse: collapse; margin: 8px 0; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 10px; border-bottom: 1px solid #ddd; text-align: left; }
td { white-space: nowrap; } td.w { white-space: normal; min-width: 16em; }
td.n { text-align: right; white-space: nowrap; } th { background: #f4f4f4; }
p.more { color: #666; margin-top: 0; }
.chart { height: 420px; margin: 12px 0 28px; border: 1px solid #eee; }
.tables { display: flex; flex-wrap: wrap; gap: 24px; align-items: flex-start; }
table.headline th { background: none; font-weight: 600; padding-right: 24px; }
"""


def _headline(report: Report) -> str:
    """The report's headline figures (`Report.headline()`, as the text report's block)."""
    h = report.headline()

    def stamp(value: Any) -> str:
        return "" if value is None else str(jsonable(value))

    rate = "" if h["failure_rate"] is None else f" ({100 * h['failure_rate']:.1f} %)"
    most = ", ".join(f"{r['action']} ({r['failed']:,})" for r in h["most_failures"]) or "none"
    slowest = h["slowest_p90"]
    stuck = f"{h['stuck']:,} still running or waiting as of {stamp(h['as_of'])}"
    if h["stuck_failing"]:
        stuck += f" (and {h['stuck_failing']:,} failing, counted above)"
    rows = [
        ("Data", freshness_text(report)),
        ("Operations", f"{h['operations']:,}, created {stamp(h['first_created_at'])} .. "
         f"{stamp(h['last_created_at'])}"),
        ("Failed at least once", f"{h['failed']:,}{rate}; {h['retries']:,} retries"),
        ("Failing now (failed or error)", f"{h['failing_now']:,}"),
        (f"Stuck (not terminal {_duration(h['stuck_after'])} after creation)", stuck),
        ("Most failures", most),
        (
            "Most failures by branch",
            "; ".join(branch_failure_text(r) for r in h["most_failures_by_branch"]) or "none",
        ),
        (
            "Slowest by p90",
            "none"
            if slowest is None
            else f"{slowest['action']} ({slowest['p90_ms']:,.0f} ms"
            + (f", n={slowest['n']:,})" if slowest["n"] < SMALL_N else ")"),
        ),
    ]  # fmt: skip
    return _rows_table(rows)


def _rows_table(rows: list[tuple[str, str]]) -> str:
    """The headline's table: a name and its value per row."""
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in rows)
    return f'<table class="headline"><tbody>{body}</tbody></table>'


# A branch in one cell, as the text report shows it: its name, its id, deleted or not.
_BRANCH_TABLE = ("branch", *BRANCH_COLUMNS[2:3], *BRANCH_COLUMNS[4:])


def _duration(delta: dt.timedelta) -> str:
    seconds = int(delta.total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def render_html(
    con: duckdb.DuckDBPyConnection, report: Report, *, as_of: dt.datetime | None = None
) -> str:
    """The page for `report` (from `build_report` on `con`): the headline, the charts, the
    tables. `as_of` dates "stuck" (default: the report's own "now", as its headline)."""
    from plotly.offline import get_plotlyjs

    now = as_of or report.as_of or dt.datetime.now(dt.timezone.utc)
    title = f"opsaudit report: {report.operations:,} operations"
    window = html.escape(_describe(report))
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{_STYLE}</style>",
        # plotly.js, inline: the page needs no network (module docstring).
        f"<script>{get_plotlyjs()}</script>",
        "</head><body>",
        f"<h1>{html.escape(title)}</h1>",
        f"<p>{window}. Generated {html.escape(str(jsonable(now)))}.</p>",
    ]
    if report.operations == 0:
        # Still how fresh (PRODUCT.md: every format): an empty window may be a sync that stopped.
        parts.append(_rows_table([("Data", freshness_text(report))]))
        parts.append(f"<p>{html.escape(empty_message(report))}</p></body></html>")
        return "\n".join(parts) + "\n"
    totals = report.totals()  # of the lists `build_report(top=N)` cut
    parts += [
        _headline(report),
        *_on_call(report),
        '<div class="tables"><div><h2>Top error texts</h2>',
        *_top(ERROR_COLUMNS, report.errors, ""),
        "</div><div><h2>Failures per project</h2>",
        *_top(PROJECT_COLUMNS, report.projects, "failure_rate", totals["projects"]),
        "</div><div><h2>Failures per branch (latest name; deleted: no longer listed)</h2>",
        *_top(_BRANCH_TABLE, with_branch(report.branches), "failure_rate", totals["branches"]),
        "</div></div>",
    ]
    figures = _figures(con, report, now)
    for chart in CHARTS:
        body = figures[chart].to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=f"chart-{chart}",
            config={"displaylogo": False, "displayModeBar": False, "responsive": True},
            default_height="420px",
        )
        parts.append(f'<div class="chart">{body}</div>')
    parts += [
        "<h2>Failures per action (failed = failed at least once; failing_now = status failed or "
        "error)</h2>",
        _table(FAILURE_COLUMNS, report.failures, "failure_rate"),
        "<h2>Durations of terminal operations in ms (wall = updated_at - created_at)</h2>",
        _table(DURATION_COLUMNS, report.durations, ""),
        "<h2>Action mix</h2>",
        _table(MIX_COLUMNS, report.action_mix, "share"),
        "</body></html>",
    ]
    return "\n".join(parts) + "\n"


def _describe(report: Report) -> str:
    bits = window_parts(report, since="created since", projects="projects")
    text = "; ".join(bits)  # not .capitalize(): it lower-cases the rest (2025-01-12t14:00:00z)
    return text[:1].upper() + text[1:] if bits else "All time, all projects"
