"""build_report, its time window and project filters, and parse_since / parse_until."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from exporter.analytics.report import build_report, parse_since, parse_until
from exporter.analytics.report_figures import whole_months
from exporter.analytics.report_text import render_report
from exporter.analytics.views import connect
from exporter.core.errors import ConfigError

from .conftest import at

UTC = dt.timezone.utc


def mix(report: Any) -> dict[str, int]:
    return {r["action"]: r["operations"] for r in report.action_mix}


def test_report_everything(con: Any) -> None:
    report = build_report(con)
    assert report.operations == 12
    assert report.failures == [
        {"action": "start_compute", "operations": 6, "failed": 2}
        | {"failure_rate": pytest.approx(2 / 6), "retries": 3, "failing_now": 1},
        {"action": "suspend_compute", "operations": 3, "failed": 1}
        | {"failure_rate": pytest.approx(1 / 3), "retries": 1, "failing_now": 1},
        {"action": "create_branch", "operations": 2, "failed": 0}
        | {"failure_rate": 0.0, "retries": 0, "failing_now": 0},
        {"action": "lfc_autoresize", "operations": 1, "failed": 0}
        | {"failure_rate": 0.0, "retries": 0, "failing_now": 0},
    ]
    # Same numbers as duration_by_action (terminal operations; quantile_cont).
    assert [(r["action"], r["operations"], r["p50_ms"], r["max_ms"]) for r in report.durations] == [
        ("start_compute", 4, 250.0, 400),
        ("create_branch", 2, 10.0, 20),
        ("suspend_compute", 2, 55.0, 60),
    ]
    assert report.durations[0]["p90_ms"] == pytest.approx(370.0)
    assert report.durations[0]["wall_p99_ms"] == pytest.approx(9790.0)
    assert report.action_mix == [
        {"action": "start_compute", "operations": 6, "share": 0.5},
        {"action": "suspend_compute", "operations": 3, "share": 0.25},
        {"action": "create_branch", "operations": 2, "share": pytest.approx(2 / 12)},
        {"action": "lfc_autoresize", "operations": 1, "share": pytest.approx(1 / 12)},
    ]


def test_report_time_window(con: Any) -> None:
    # Jan 11 only: o4 (start), o5 (suspend, failed), o6 (create_branch).
    report = build_report(con, since=parse_since("2025-01-11"), until=parse_until("2025-01-11"))
    assert report.operations == 3
    assert mix(report) == {"start_compute": 1, "suspend_compute": 1, "create_branch": 1}
    assert {r["action"]: r["failed"] for r in report.failures} == {
        "suspend_compute": 1,
        "start_compute": 0,
        "create_branch": 0,
    }
    # since is inclusive, until exclusive, to the microsecond.
    report = build_report(con, since=at(12, 10, 30), until=at(12, 12))
    assert mix(report) == {"suspend_compute": 1, "start_compute": 1}  # o11, o10


def test_report_project_filter(con: Any) -> None:
    report = build_report(con, project_ids=["p2"])
    assert report.operations == 5
    assert mix(report) == {"start_compute": 2, "create_branch": 2, "suspend_compute": 1}
    both = build_report(con, project_ids=["p1", "p2", "it's-not-there"])
    assert both.operations == 12
    assert build_report(con, project_ids=["nope"]).operations == 0
    # A notebook's one id as a string was taken for its characters: 0 operations, no error.
    with pytest.raises(ValueError) as err:
        build_report(con, project_ids="p2")
    assert str(err.value) == "project_ids is a list of ids, not the string 'p2'"


def test_report_superseded_versions_do_not_count(con: Any) -> None:
    # o3's version 2 was failed with failures_count 1; only its latest state (finished, 2) counts.
    report = build_report(con, since=at(10, 12), until=at(10, 13))
    assert report.failures == [
        {"action": "start_compute", "operations": 1, "failed": 1, "failure_rate": 1.0}
        | {"retries": 2, "failing_now": 0}
    ]


def test_report_on_an_empty_data_dir(tmp_path: Path) -> None:
    con = connect(tmp_path)
    try:
        report = build_report(con)
    finally:
        con.close()
    assert (report.operations, report.failures, report.durations, report.action_mix) == (
        0,
        [],
        [],
        [],
    )
    assert "No operations in the dataset yet" in render_report(report, "table")
    assert "No operations in the dataset yet" in render_report(report, "markdown")


NOW = dt.datetime(2025, 1, 16, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("7d", dt.datetime(2025, 1, 9, 12, 0, tzinfo=UTC)),
        ("24h", dt.datetime(2025, 1, 15, 12, 0, tzinfo=UTC)),
        ("30m", dt.datetime(2025, 1, 16, 11, 30, tzinfo=UTC)),
        ("2w", dt.datetime(2025, 1, 2, 12, 0, tzinfo=UTC)),
        ("2025-01-01", dt.datetime(2025, 1, 1, tzinfo=UTC)),
        ("2025-01-01T10:00:00Z", dt.datetime(2025, 1, 1, 10, tzinfo=UTC)),
        ("2025-01-01T10:00:00.5+02:00", dt.datetime(2025, 1, 1, 8, 0, 0, 500000, tzinfo=UTC)),
    ],
)
def test_parse_since(text: str, expected: dt.datetime) -> None:
    assert parse_since(text, now=NOW) == expected


def test_parse_until_includes_a_whole_date() -> None:
    assert parse_until("2025-01-31", now=NOW) == dt.datetime(2025, 2, 1, tzinfo=UTC)
    assert parse_until("1d", now=NOW) == dt.datetime(2025, 1, 15, 12, tzinfo=UTC)


@pytest.mark.parametrize("text", ["yesterday", "7x", "2025-13-01", "2025-01-01T25:00:00Z"])
def test_parse_since_rejects(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_since(text, now=NOW)


def _dataset_with(
    tmp_path: Path, earlier: list[Any], later: list[Any], synced: bool = False
) -> Any:
    """The fixed dataset plus one more operation: `earlier` versions in a third run, `later`
    ones in a fourth (its superseded record lists the earlier ones); `synced`: as a sync
    leaves it, with the summary record the report then reads."""
    from .conftest import as_synced, write_dataset, write_versions

    data_dir = write_dataset(tmp_path / "data")
    write_versions(data_dir, earlier, "run-3")
    write_versions(data_dir, later, "run-4")
    return connect(as_synced(data_dir) if synced else data_dir)


@pytest.mark.parametrize(
    "since, until, expected",
    [
        (None, None, True),
        (dt.datetime(2026, 10, 25, tzinfo=dt.timezone.utc), None, True),  # November, begun
        (dt.datetime(2026, 11, 17, tzinfo=dt.timezone.utc), None, False),  # --since 7d
        (dt.datetime(2026, 11, 1, tzinfo=dt.timezone.utc), None, True),
        (
            dt.datetime(2026, 8, 10, 7, 30, tzinfo=dt.timezone.utc),
            dt.datetime(2026, 10, 1, tzinfo=dt.timezone.utc),
            True,  # September
        ),
        (
            dt.datetime(2026, 8, 10, tzinfo=dt.timezone.utc),
            dt.datetime(2026, 9, 20, tzinfo=dt.timezone.utc),
            False,
        ),
        (None, dt.datetime(2026, 9, 20, tzinfo=dt.timezone.utc), True),
    ],
)
def test_which_windows_read_the_summary_record(
    since: dt.datetime | None, until: dt.datetime | None, expected: bool
) -> None:
    """A window reads the summary record only where it holds a month whole: one of parts of
    months reads its rows, as before the record (the summary would only add work)."""
    as_of = dt.datetime(2026, 11, 24, 12, tzinfo=dt.timezone.utc)
    assert whole_months(since, until, as_of) is expected


SYNCED = pytest.mark.parametrize("synced", [False, True], ids=["every-version", "summary"])


@SYNCED
def test_per_action_figures_when_a_finished_version_was_superseded(
    tmp_path: Path, synced: bool
) -> None:
    """The per-action figures come from every version minus the superseded ones (issue 24);
    a superseded version that was terminal would count in the durations, so the report reads
    the latest states instead: t1 finished in 100 ms, then was cancelled at 5,000 ms."""
    con = _dataset_with(
        tmp_path,
        [("t1", "p1", "ep1", "start_compute", "finished", 0, 100, at(12, 7), 1, None, 1)],
        [("t1", "p1", "ep1", "start_compute", "cancelled", 0, 5000, at(12, 7), 9, None, 2)],
        synced,
    )
    report = build_report(con, now=at(13, 0))
    start = next(r for r in report.durations if r["action"] == "start_compute")
    # o1 100, o4 200, o3 300, o10 400 and t1's latest 5,000 ms: not t1's first 100.
    assert (start["operations"], start["p50_ms"], start["max_ms"]) == (5, 300.0, 5000)
    assert mix(report)["start_compute"] == 7
    assert report.operations == 13
    # The failure counts per project subtract the superseded versions too (o3's and t1's).
    assert report.projects[0] == {
        "project_id": "p1",
        "operations": 8,
        "failed": 2,
        "failure_rate": 0.25,
        "retries": 3,
        "failing_now": 1,
    }


@SYNCED
def test_first_created_at_when_only_a_superseded_version_held_it(
    tmp_path: Path, synced: bool
) -> None:
    """An operation whose created_at moved between versions: the first created_at of the
    report is the latest state's, though every version's minimum is the superseded one's."""
    con = _dataset_with(
        tmp_path,
        [("e1", "p2", None, "create_branch", "running", 0, 0, at(9, 8), 1, None, 1)],
        [("e1", "p2", None, "create_branch", "finished", 0, 30, at(10, 9), 1, None, 2)],
        synced,
    )
    report = build_report(con, now=at(13, 0))
    assert report.first_created_at == at(10, 9)
    assert (report.operations, mix(report)["create_branch"]) == (13, 3)


def test_report_calls_name_every_definition_the_reports_queries_mention() -> None:
    """`opsaudit report` defines only report_names() (REPORT_CALLS and what they name): a
    query of the report naming a view or macro left out would fail with a catalog error. Every
    definition the SQL text of the modules that query the report's connection mentions is one of
    them (docstrings aside: they name definitions no query runs)."""
    import ast
    import inspect
    import textwrap

    import exporter.analytics.html
    import exporter.analytics.report
    import exporter.analytics.report_figures
    from exporter.analytics.report import REPORT_SQL
    from exporter.analytics.report_figures import report_names
    from exporter.analytics.views import _WORD, _definitions, sql_files
    from exporter.cli._query import _unknown_projects

    defined = {
        name
        for path in sql_files()
        if path.name in REPORT_SQL
        for name, _ in _definitions(path)
        if name is not None
    }
    modules = [
        exporter.analytics.report,
        exporter.analytics.report_figures,
        exporter.analytics.html,
    ]
    sources = [inspect.getsource(m) for m in modules]
    sources.append(textwrap.dedent(inspect.getsource(_unknown_projects)))
    mentioned: set[str] = set()
    for source in sources:
        tree = ast.parse(source)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, (ast.Module, ast.FunctionDef, ast.ClassDef))
            and ast.get_docstring(node, clean=False) is not None
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in docstrings
            ):
                mentioned |= set(_WORD.findall(node.value.lower())) & defined
    assert "report_flagged_rows_whole" in mentioned  # the scan finds the queries' names
    assert mentioned <= report_names(), sorted(mentioned - report_names())
