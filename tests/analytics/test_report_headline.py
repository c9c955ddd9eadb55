"""The report reads top-down (issue 15): a headline block first, then tables cut to the top rows
in a terminal; json, csv and markdown keep every row. Figures checked exactly by hand."""

from __future__ import annotations

import dataclasses
import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from exporter.analytics.report import build_report
from exporter.analytics.report_text import render_report
from exporter.analytics.views import connect
from exporter.cli import cli

from .conftest import at, write_versions

UTC = dt.timezone.utc


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)


@pytest.mark.parametrize(
    ("now", "stuck", "stuck_failing"),
    [
        # Open: o5 (failed, 11th 10:00), o7 (12th 08:00), o8 (error, 12th 09:00), o12 (12th 12:00).
        # Stuck counts o7 and o12 only: o5 and o8 are failing now (issue 23: no double count).
        (at(12, 12, 30), 1, 2),  # o7; o12 is 30 minutes old
        (at(12, 13), 1, 2),  # o12 is exactly 1 hour old: not yet stuck
        (at(12, 13, 0, 1), 2, 2),  # ... and one second later it is
        (at(12, 8, 30), 0, 1),  # o7 is 30 minutes old; o5 old and failing; o8 comes later
    ],
)
def test_headline_of_the_fixed_dataset(
    report_con: Any, now: dt.datetime, stuck: int, stuck_failing: int
) -> None:
    headline = build_report(report_con, now=now).headline()
    assert headline == {
        "operations": 12,
        "first_created_at": at(10, 10),  # o1
        "last_created_at": at(12, 12),  # o12
        "failed": 3,  # o3 (2 failures), o5 (1), o8 (1)
        "failure_rate": 0.25,
        "retries": 4,
        "failing_now": 2,  # o5 failed, o8 error
        "stuck": stuck,
        "stuck_failing": stuck_failing,
        "stuck_after": dt.timedelta(hours=1),
        "as_of": now,
        "most_failures": [
            {"action": "start_compute", "failed": 2},  # o3, o8
            {"action": "suspend_compute", "failed": 1},  # o5
        ],
        # The same failures by branch: the dataset's branches were never listed (no name).
        "most_failures_by_branch": [
            {"action": "start_compute", "failed": 2, "branch_name": None, "branch_id": "br-p1"}
            | {"project_id": "p1", "deleted_at": None},
            {"action": "suspend_compute", "failed": 1, "branch_name": None, "branch_id": "br-p2"}
            | {"project_id": "p2", "deleted_at": None},
        ],
        # start_compute terminal durations 100, 200, 300, 400: p90 = 300 + 0.7 * 100.
        "slowest_p90": {"action": "start_compute", "p90_ms": 370.0, "n": 4},
    }


def test_stuck_bound_is_a_parameter(report_con: Any) -> None:
    report = build_report(report_con, now=at(12, 12, 30), stuck_after=dt.timedelta(hours=4))
    # o7 (4.5 hours) and o5 (failing, 26.5 hours); o8 and o12 are younger.
    assert (report.headline()["stuck"], report.headline()["stuck_failing"]) == (1, 1)
    assert (
        "Stuck          1 still running or waiting, not terminal 4 hours after creation (and 1 "
        "failing, counted above)\n"
    ) in render_report(report, "table")


def test_headline_block_comes_first(con: Any) -> None:
    text = render_report(build_report(con, now=at(12, 12, 30)), "table")
    assert text.startswith(
        "opsaudit report: 12 operations (all time, all projects)\n"
        "\n"
        # run-1 (ok) finished 2025-01-11 10:02, run-2 (partial) 2025-01-12 13:01.
        "Data           last successful sync 2025-01-11T10:02:00Z, 1d 2h before this report; "
        "last run 2025-01-12T13:01:00Z: partial\n"
        "Operations     12, created 2025-01-10T10:00:00Z to 2025-01-12T12:00:00Z\n"
        "Failure rate   25.0 % (3 failed at least once; 4 retries) (n=12)\n"
        "Failing now    2 (latest status failed or error)\n"
        "Stuck          1 still running or waiting, not terminal 1 hour after creation (and 2 "
        "failing, counted above)\n"
        "Most failures  start_compute 2, suspend_compute 1\n"
        "By branch      start_compute failed 2 times on br-p1; suspend_compute failed once on "
        "br-p2\n"
        "Slowest (p90)  start_compute 370 ms (n=4)\n"
        "\n"
        "Failing now (latest status failed or error), oldest first\n"
    )
    markdown = render_report(build_report(con, now=at(12, 12, 30)), "markdown")
    assert markdown.startswith(
        "# opsaudit report: 12 operations (all time, all projects)\n"
        "\n"
        "- **Data**: last successful sync 2025-01-11T10:02:00Z, 1d 2h before this report; "
        "last run 2025-01-12T13:01:00Z: partial\n"
        "- **Operations**: 12, created 2025-01-10T10:00:00Z to 2025-01-12T12:00:00Z\n"
        "- **Failure rate**: 25.0 % (3 failed at least once; 4 retries) (n=12)\n"
        "- **Failing now**: 2 (latest status failed or error)\n"
        "- **Stuck**: 1 still running or waiting, not terminal 1 hour after creation (and 2 "
        "failing, counted above)\n"
        "- **Most failures**: start_compute 2, suspend_compute 1\n"
        "- **By branch**: start_compute failed 2 times on br-p1; suspend_compute failed once on "
        "br-p2\n"
        "- **Slowest (p90)**: start_compute 370 ms (n=4)\n"
        "\n"
        "## Failing now"
    )


# A wider dataset: action actNN has NN operations (91 in all), one a minute from 2025-01-20
# 00:00; all finished; act10..act13 have 4, 3, 2, 1 operations that failed once; durations of
# actNN are all 10 * NN ms.
WIDE_FAILED = {"act10": 4, "act11": 3, "act12": 2, "act13": 1}


@pytest.fixture(scope="module")
def wide(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("wide") / "data"
    specs: list[tuple[Any, ...]] = []
    start = dt.datetime(2025, 1, 20, tzinfo=UTC)
    for k in range(1, 14):
        action = f"act{k:02d}"
        for j in range(k):
            created = start + dt.timedelta(minutes=len(specs))
            fc = 1 if j < WIDE_FAILED.get(action, 0) else 0
            specs.append(
                (f"w{len(specs)}", "p1", "ep1", action, "finished", fc, 10 * k, created, 1, None, 1)
            )
    write_versions(data_dir, specs, "run-1")
    return data_dir


def test_the_more_line_carries_thousands_separators(tmp_path: Path) -> None:
    """ "(10 of 2956 rows; 2,946 more ...)": the total had no separators (README: counts carry
    them), nor a --top of a thousand or more."""
    start = dt.datetime(2025, 1, 20, tzinfo=UTC)
    specs = [
        (f"s{k}", "p1", "ep1", "start_compute", "running", 0, None, start, 1, None, 1)
        for k in range(1234)
    ]
    write_versions(tmp_path, specs, "run-1")
    out = invoke("report", "--data-dir", str(tmp_path)).stdout
    assert out.count("(10 of 1,234 rows; 1,224 more with --all or --top N)\n") == 1  # stuck
    top = invoke("report", "--data-dir", str(tmp_path), "--top", "1000").stdout
    assert top.count("(1,000 of 1,234 rows; 234 more with --all or --top N)\n") == 1


def test_headline_cuts_to_three_actions(wide: Path) -> None:
    con = connect(wide)
    try:
        headline = build_report(con, now=dt.datetime(2025, 2, 1, tzinfo=UTC)).headline()
    finally:
        con.close()
    assert headline["operations"] == 91
    assert (headline["first_created_at"], headline["last_created_at"]) == (
        dt.datetime(2025, 1, 20, 0, 0, tzinfo=UTC),
        dt.datetime(2025, 1, 20, 1, 30, tzinfo=UTC),
    )
    assert (headline["failed"], headline["retries"], headline["failure_rate"]) == (10, 10, 10 / 91)
    assert (headline["failing_now"], headline["stuck"]) == (0, 0)
    assert headline["most_failures"] == [
        {"action": "act10", "failed": 4},
        {"action": "act11", "failed": 3},
        {"action": "act12", "failed": 2},
    ]
    assert headline["slowest_p90"] == {"action": "act13", "p90_ms": 130.0, "n": 13}
    # By branch: the three (of four) branch and action pairs with the most failures.
    assert [(r["action"], r["failed"]) for r in headline["most_failures_by_branch"]] == [
        ("act10", 4),
        ("act11", 3),
        ("act12", 2),
    ]


def test_terminal_tables_show_the_top_ten(wide: Path) -> None:
    result = invoke("report", "--data-dir", str(wide))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert out.count("(10 of 13 rows; 3 more with --all or --top N)\n") == 3
    failures = out.split("Failures per action (", 1)[1].split("\n\n", 1)[0].splitlines()
    # Heading, header, rule, 10 rows, the "more" line.
    assert len(failures) == 14
    assert failures[3].split()[:3] == ["act10", "10", "4"]
    # Then the actions without failures, most operations first: act09 .. act04 is the 10th.
    assert failures[12].split()[:3] == ["act04", "4", "0"]
    top3 = invoke("report", "--data-dir", str(wide), "--top", "3").stdout
    assert top3.count("(3 of 13 rows; 10 more with --all or --top N)\n") == 3
    every = invoke("report", "--data-dir", str(wide), "--all").stdout
    assert every.count("(13 rows)\n") == 3
    assert "more with --all" not in every


def test_other_formats_keep_every_row(wide: Path) -> None:
    as_json = orjson.loads(invoke("report", "--data-dir", str(wide), "--format", "json").stdout)
    assert [len(as_json[k]) for k in ("failures", "durations", "action_mix")] == [13, 13, 13]
    csv = invoke("report", "--data-dir", str(wide), "--format", "csv", "--top", "2").stdout
    # Freshness's row; 13 rows in each of failures, durations and action_mix; 1 project, 1
    # branch; no error, failing or stuck operation.
    assert len(csv.splitlines()) == 1 + 1 + 3 * 13 + 1 + 1
    markdown = invoke("report", "--data-dir", str(wide), "--format", "markdown").stdout
    assert markdown.count("| act01 |") == 3
    assert "more with --all" not in markdown


def test_on_call_tables_of_the_fixed_dataset(report_con: Any) -> None:
    con = report_con
    """Issue 23: what is failing and stuck (oldest first, each listed once), the error texts,
    failures per project; ages at `now`, hand-computed from the dataset's table."""
    report = build_report(con, now=at(12, 14))
    text = render_report(report, "table")
    start = text.index("Failing now (latest")
    assert text[start : text.index("Failures per action")] == (
        "Failing now (latest status failed or error), oldest first\n"
        "id  project_id  branch  action           status  error                  age\n"
        "--  ----------  ------  ---------------  ------  ---------------------  --------------\n"
        "o5  p2          br-p2   suspend_compute  failed  pod not ready          1 day 04:00:00\n"
        "o8  p1          br-p1   start_compute    error   no capacity in region  05:00:00\n"
        "(2 rows)\n"
        "\n"
        "Stuck: still running or waiting 1 hour after creation, oldest first\n"
        "id   project_id  branch  action          status              error  age\n"
        "---  ----------  ------  --------------  ------------------  -----  --------\n"
        "o7   p1          br-p1   lfc_autoresize  waiting_for_quorum  NULL   06:00:00\n"
        "o12  p2          br-p2   start_compute   scheduling          NULL   02:00:00\n"
        "(2 rows)\n"
        "\n"
        "Top error texts (operations that reported each)\n"
        "error                         operations  actions          last_seen\n"
        "----------------------------  ----------  ---------------  --------------------\n"
        "no capacity in region                  1  start_compute    2025-01-12T09:00:04Z\n"
        "pod not ready                          1  suspend_compute  2025-01-11T10:00:05Z\n"
        "pageserver request timed out           1  start_compute    2025-01-10T12:00:05Z\n"
        "(3 rows)\n"
        "\n"
        "Failures per project\n"
        "project_id  operations  failed  failure_rate_%  retries  failing_now\n"
        "----------  ----------  ------  --------------  -------  -----------\n"
        "p1                   7       2            28.6        3            1\n"
        "p2                   5       1            20.0        1            1\n"
        "(2 rows)\n"
        "\n"
        "Failures per branch (latest name; deleted: no longer listed)\n"
        "branch  project_id  operations  failed  failure_rate_%  retries  failing_now\n"
        "------  ----------  ----------  ------  --------------  -------  -----------\n"
        "br-p1   p1                   7       2            28.6        3            1\n"
        "br-p2   p2                   5       1            20.0        1            1\n"
        "(2 rows)\n"
        "\n"
    )
    data = orjson.loads(render_report(report, "json"))
    assert data["failing_operations"] == [
        {"id": "o5", "project_id": "p2", "branch_id": "br-p2", "branch_name": None}
        | {"branch_deleted_at": None, "action": "suspend_compute", "status": "failed"}
        | {"error": "pod not ready", "age": "PT100800S"},
        {"id": "o8", "project_id": "p1", "branch_id": "br-p1", "branch_name": None}
        | {"branch_deleted_at": None, "action": "start_compute", "status": "error"}
        | {"error": "no capacity in region", "age": "PT18000S"},
    ]
    assert [r["id"] for r in data["stuck_operations"]] == ["o7", "o12"]
    assert data["freshness"] == {
        "last_success_at": "2025-01-11T10:02:00Z",
        "lag": "PT100680S",  # 1 day 3 h 58 min before 2025-01-12 14:00
        "last_run_at": "2025-01-12T13:01:00Z",
        "last_run_outcome": "partial",
        "last_run_projects_ok": None,
        "last_run_projects": None,
    }
    markdown = render_report(report, "markdown")
    assert (
        "## Stuck: still running or waiting 1 hour after creation, oldest first\n\n"
        "| id | project_id | branch | action | status | error | age |\n"
        "|---|---|---|---|---|---|---|\n"
        "| o7 | p1 | br-p1 | lfc_autoresize | waiting_for_quorum | NULL | 06:00:00 |\n"
        "| o12 | p2 | br-p2 | start_compute | scheduling | NULL | 02:00:00 |\n"
    ) in markdown


# The report's csv columns before freshness's (every section's, in order), and freshness's.
CSV_COLUMNS = (
    "section,id,project_id,branch_id,branch_name,branch_deleted_at,action,status,error,age,"
    "operations,actions,last_seen,failed,failure_rate,retries,failing_now,deleted_at,p50_ms,"
    "p90_ms,p99_ms,max_ms,wall_p50_ms,wall_p90_ms,wall_p99_ms,wall_max_ms,share"
)
FRESHNESS_CSV = (
    "last_success_at,lag,last_run_at,last_run_outcome,last_run_projects_ok,last_run_projects"
)


def test_csv_says_how_fresh_the_data_is(report_con: Any) -> None:
    """PRODUCT.md: every format of the report says how fresh the data is; csv did not. Its row
    comes first, as the headline's line; its columns last, so every other column keeps its
    place; `--section freshness` is that row alone."""
    report = build_report(report_con, now=at(12, 14))
    lines = render_report(report, "csv").splitlines()
    assert lines[0] == f"{CSV_COLUMNS},{FRESHNESS_CSV}"
    others = CSV_COLUMNS.count(",")  # the columns after `section` that freshness leaves empty
    assert lines[1] == (
        "freshness"
        + "," * others
        + ",2025-01-11T10:02:00Z,PT100680S,2025-01-12T13:01:00Z,partial,,"
    )
    assert [line.split(",")[0] for line in lines[1:3]] == ["freshness", "failing"]
    assert lines[2] == "failing,o5,p2,br-p2,,,suspend_compute,failed,pod not ready,PT100800S" + (
        "," * (others - 9 + 6)
    )
    assert render_report(report, "csv", section="freshness") == (
        f"{FRESHNESS_CSV}\n2025-01-11T10:02:00Z,PT100680S,2025-01-12T13:01:00Z,partial,,\n"
    )
    # Over several datasets, the least fresh one's, named (as json's `dataset`).
    several = dataclasses.replace(report, freshness={**report.freshness, "dataset": "/d/a"})
    assert render_report(several, "csv", section="freshness") == (
        f"{FRESHNESS_CSV},dataset\n"
        "2025-01-11T10:02:00Z,PT100680S,2025-01-12T13:01:00Z,partial,,,/d/a\n"
    )
    assert render_report(several, "csv").splitlines()[0] == f"{CSV_COLUMNS},{FRESHNESS_CSV},dataset"


def test_error_texts_name_the_three_actions_that_reported_them_most(tmp_path: Path) -> None:
    # "boom": a1 three operations, a2 two, a3 .. a5 one each (a3 before a4: by name); "bang": a1.
    created = dt.datetime(2025, 1, 20, tzinfo=UTC)
    specs: list[tuple[Any, ...]] = []
    for action, n in (("a1", 3), ("a2", 2), ("a4", 1), ("a3", 1), ("a5", 1)):
        for _ in range(n):
            at_ = created + dt.timedelta(minutes=len(specs))
            specs.append(
                (f"e{len(specs)}", "p1", None, action, "failed", 1, None, at_, 1, "boom", 1)
            )
    specs.append(("e99", "p1", None, "a1", "failed", 1, None, created, 1, "bang", 1))
    data_dir = tmp_path / "data"
    write_versions(data_dir, specs, "run-1")
    con = connect(data_dir)
    try:
        errors = build_report(con, now=dt.datetime(2025, 1, 21, tzinfo=UTC)).errors
    finally:
        con.close()
    assert errors == [
        {"error": "boom", "operations": 8, "actions": "a1, a2, a3 (+2 more)"}
        | {"last_seen": dt.datetime(2025, 1, 20, 0, 7, 1, tzinfo=UTC)},
        {"error": "bang", "operations": 1, "actions": "a1"}
        | {"last_seen": dt.datetime(2025, 1, 20, 0, 0, 1, tzinfo=UTC)},
    ]


# Many operations failing now and stuck (more than a table shows), several created at the same
# instant: their order is by age, then id.
@pytest.fixture(scope="module")
def on_call(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("on-call") / "data"
    specs: list[tuple[Any, ...]] = []
    start = dt.datetime(2025, 1, 20, tzinfo=UTC)
    for k in range(60):
        created = start + dt.timedelta(minutes=k // 3)  # three at each instant
        status, fc, error = ("failed", 1, f"error {k % 4}") if k % 2 else ("running", 0, None)
        project = f"p{k % 3}"
        specs.append(
            (
                f"q{59 - k:02d}",
                project,
                "ep1",
                "start_compute",
                status,
                fc,
                None,
                created,
                5,
                error,
                1,
            )
        )
    specs.append(("done", "p1", "ep1", "start_compute", "finished", 0, 7, start, 1, None, 1))
    write_versions(data_dir, specs, "run-1")
    return data_dir


@pytest.mark.parametrize("top", [1, 3, 10, 29, 30, 31, 1_000_000])
def test_a_report_of_the_shown_rows_reads_as_the_whole_one(on_call: Path, top: int) -> None:
    """`build_report(top=N)` (the table format, the HTML page) fetches only the rows a table
    shows of the failing and stuck lists: the same text as from the whole lists (a million:
    beyond what DuckDB's min_by keeps, every row is read and cut)."""
    now = dt.datetime(2025, 1, 21, tzinfo=UTC)
    con = connect(on_call)
    try:
        whole = build_report(con, now=now)
        cut = build_report(con, now=now, top=top)
    finally:
        con.close()
    assert (len(whole.failing_operations), len(whole.stuck_operations)) == (30, 30)
    assert (len(cut.failing_operations), len(cut.stuck_operations)) == (min(top, 30),) * 2
    assert (cut.failing_total, cut.stuck_total) == (30, 30)
    assert cut.stuck_failing == whole.stuck_failing == 30
    assert cut.failing_operations == whole.failing_operations[:top]
    assert cut.stuck_operations == whole.stuck_operations[:top]
    # Failures per project and per branch likewise (3 of each here); the pairs of branch and
    # action at least as far as the headline names them (3).
    assert (len(whole.projects), len(whole.branches), len(whole.branch_failures)) == (3, 3, 3)
    assert cut.projects == whole.projects[:top]
    assert cut.branches == whole.branches[:top]
    assert cut.branch_failures == whole.branch_failures
    assert (
        cut.totals()
        == whole.totals()
        == {
            "failing_operations": 30,
            "stuck_operations": 30,
            "projects": 3,
            "branches": 3,
            "branch_failures": 3,
        }
    )
    text = render_report(cut, "table", top=top)
    assert text == render_report(whole, "table", top=top)
    if top < 30:
        assert text.count(f"({top} of 30 rows; {30 - top} more with --all or --top N)\n") == 2
    if top < 30:
        for fmt in ("json", "csv", "markdown"):  # these write every row: not from a cut report
            with pytest.raises(ValueError, match=f"only their first {top} rows"):
                render_report(cut, fmt)
        with pytest.raises(ValueError, match="only their first"):
            render_report(cut, "table", top=top + 1)
    else:
        assert render_report(cut, "json") == render_report(whole, "json")


def test_a_report_of_no_rows_shown_is_refused(on_call: Path) -> None:
    con = connect(on_call)
    try:
        with pytest.raises(ValueError, match="top must be 1 or more, not 0"):
            build_report(con, top=0)
    finally:
        con.close()


def test_a_cut_report_counts_the_old_failing_ones_of_the_whole_list(on_call: Path) -> None:
    """At 01:10 the operations of 00:00-00:09 are older than an hour, those of 00:10-00:19 not:
    a report of the first 3 rows counts the old failing ones (15 of 30) and the stuck ones
    (15) over the whole lists, not over the rows it shows."""
    now = dt.datetime(2025, 1, 20, 1, 10, tzinfo=UTC)
    con = connect(on_call)
    try:
        whole = build_report(con, now=now)
        cut = build_report(con, now=now, top=3)
    finally:
        con.close()
    assert (whole.stuck_failing, len(whole.failing_operations), len(whole.stuck_operations)) == (
        15,
        30,
        15,
    )
    assert (cut.stuck_failing, cut.failing_total, cut.stuck_total) == (15, 30, 15)
    assert cut.failing_operations == whole.failing_operations[:3]
    assert cut.stuck_operations == whole.stuck_operations[:3]


def test_the_page_of_the_shown_rows_reads_as_the_whole_one(on_call: Path) -> None:
    from exporter.analytics.html import TOP_ROWS, render_html

    now = dt.datetime(2025, 1, 21, tzinfo=UTC)
    con = connect(on_call)
    try:
        whole = render_html(con, build_report(con, now=now))
        page = render_html(con, build_report(con, now=now, top=TOP_ROWS))
        with pytest.raises(ValueError, match="only their first 5 rows"):
            render_html(con, build_report(con, now=now, top=5))
    finally:
        con.close()
    assert page == whole
    assert page.count(f"{TOP_ROWS} of 30 rows; all of them") == 2


def test_an_operation_without_an_action_is_reported_last_among_equals(tmp_path: Path) -> None:
    """An operation whose page had no action is stored with none (core.operation): the report
    ranks it as SQL does (NULLS LAST) where its figures tie with another action's, instead of
    comparing nothing with a name."""
    start = dt.datetime(2025, 1, 20, tzinfo=UTC)
    specs = [
        (f"op-{i}", "p1", "ep1", action, "finished", 0, 500, start, 1, None, 1)
        for i, action in enumerate([None, "start_compute"])
    ]
    write_versions(tmp_path / "data", specs, "run-1")
    con = connect(tmp_path / "data")
    try:
        report = build_report(con, now=start + dt.timedelta(days=1))
    finally:
        con.close()
    assert [r["action"] for r in report.failures] == ["start_compute", None]
    assert [r["action"] for r in report.durations] == ["start_compute", None]
    assert report.headline()["slowest_p90"] == {"action": "start_compute", "p90_ms": 500.0, "n": 1}
    assert [r["action"] for r in report.action_mix] == ["start_compute", None]
    text = render_report(report, "table")
    assert "start_compute" in text
