"""One test per view, on the fixed dataset of conftest.py, against hand-computed numbers.

Percentiles are DuckDB quantile_cont (linear interpolation): for n sorted values x0..x(n-1),
quantile q is at position q*(n-1), e.g. p90 of (100, 200, 300, 400) = 300 + 0.7 * 100 = 370.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from exporter.analytics.views import connect, list_macros, list_views

from .conftest import ERR_CAPACITY, ERR_POD, ERR_TIMEOUT, at, rows

D10, D11, D12 = dt.date(2025, 1, 10), dt.date(2025, 1, 11), dt.date(2025, 1, 12)


def approx(row: dict[str, Any]) -> dict[str, Any]:
    return {k: pytest.approx(v) if isinstance(v, float) else v for k, v in row.items()}


def test_view_names() -> None:
    assert list_views() == [
        "stored_operation_versions",
        "branches",
        "endpoints",
        "branch_versions",
        "endpoint_versions",
        "project_versions",
        "operation_versions",
        "operations",
        "projects",
        "sync_runs",
        "failures_by_action",
        "failures_by_project",
        "failures_by_branch",
        "failures_by_day",
        "failed_operations",
        "retried_operations",
        "latest_errors",
        "error_texts",
        "duration_by_action",
        "duration_by_day",
        "action_mix",
        "action_mix_by_day",
        "action_mix_by_project",
        "status_mix",
        "stuck_operations",
        "compute_start_latency",
        "compute_start_latency_histogram",
        "compute_start_latency_by_day",
        "compute_cycles",
        "report_summary_total",
    ]
    assert list_macros() == [
        "is_terminal",
        "is_failed",
        "is_failing",
        "wall_ms",
        "utc_age",
        "utc_before",
        "failure_counts",
        "stuck_operations_older_than",
        "report_is_stuck",
        "report_in_window",
        "report_versions",
        "report_operations",
        "report_summary_of",
        "report_summary_recorded",
        "report_whole_month",
        "report_summary_total_recorded",
        "report_from_total",
        "report_summary",
        "report_rows",
        "report_flagged_recorded",
        "report_flagged_rows",
        "report_flagged_rows_whole",
        "report_superseded_unflagged",
        "report_superseded_rows",
        "report_problems_of",
        "report_problems_in",
        "report_problems_top",
        "report_json_text",
        "report_json_instant",
        "report_json_age",
        "report_age_seconds",
        "report_problems_json",
        "report_problems",
        "report_errors_in",
        "report_errors",
        "report_failure_rollup",
        "report_failure_groups_of",
        "report_failure_groups_in",
        "report_failure_groups",
        "report_projects",
        "report_branches",
        "report_by_action",
        "report_by_action_in",
        "report_failure_groups_scan",
        "report_by_action_scan",
        "report_failures",
        "report_durations",
        "report_action_mix",
    ]


def test_operation_versions(con: Any) -> None:
    got = rows(con, "SELECT id, version, status, created_date FROM operation_versions")
    assert len(got) == 15
    o3 = sorted((r["version"], r["status"]) for r in got if r["id"] == "o3")
    assert o3 == [(1, "running"), (2, "failed"), (3, "finished")]
    assert {r["created_date"] for r in got} == {D10, D11, D12}
    types = dict(
        con.execute("SELECT column_name, column_type FROM (DESCRIBE operation_versions)").fetchall()
    )
    assert types["created_at"] == "TIMESTAMP WITH TIME ZONE"
    assert types["created_date"] == "DATE"
    assert types["total_duration_ms"] == "BIGINT"
    assert types["version"] == "INTEGER"


def test_operations_is_the_latest_state_once_per_id(con: Any) -> None:
    got = rows(con, "SELECT id, version, status, failures_count FROM operations ORDER BY id")
    assert len(got) == 12
    assert len({r["id"] for r in got}) == 12
    by_id = {r["id"]: r for r in got}
    assert (by_id["o3"]["version"], by_id["o3"]["status"], by_id["o3"]["failures_count"]) == (
        3,
        "finished",
        2,
    )
    assert (by_id["o5"]["version"], by_id["o5"]["status"]) == (2, "failed")


def test_projects_and_sync_runs(con: Any) -> None:
    assert rows(con, "SELECT id, pg_version, open_operations FROM projects ORDER BY id") == [
        {"id": "p1", "pg_version": 17, "open_operations": 2},
        {"id": "p2", "pg_version": 17, "open_operations": 2},
    ]
    assert rows(con, "SELECT run_id, outcome, versions_written FROM sync_runs ORDER BY run_id") == [
        {"run_id": "run-1", "outcome": "ok", "versions_written": 3},
        {"run_id": "run-2", "outcome": "partial", "versions_written": 12},
    ]


def test_failures_by_action(con: Any) -> None:
    assert [approx(r) for r in rows(con, "FROM failures_by_action")] == [
        {"action": "start_compute", "operations": 6, "failed": 2, "failure_rate": 2 / 6}
        | {"retries": 3, "failing_now": 1},
        {"action": "suspend_compute", "operations": 3, "failed": 1, "failure_rate": 1 / 3}
        | {"retries": 1, "failing_now": 1},
        {"action": "create_branch", "operations": 2, "failed": 0, "failure_rate": 0.0}
        | {"retries": 0, "failing_now": 0},
        {"action": "lfc_autoresize", "operations": 1, "failed": 0, "failure_rate": 0.0}
        | {"retries": 0, "failing_now": 0},
    ]


def test_failures_by_project(con: Any) -> None:
    assert [approx(r) for r in rows(con, "FROM failures_by_project")] == [
        {"project_id": "p1", "operations": 7, "failed": 2, "failure_rate": 2 / 7}
        | {"retries": 3, "failing_now": 1},
        {"project_id": "p2", "operations": 5, "failed": 1, "failure_rate": 1 / 5}
        | {"retries": 1, "failing_now": 1},
    ]


def test_failures_by_day(con: Any) -> None:
    got = rows(con, "SELECT day, operations, failed, retries, failing_now FROM failures_by_day")
    assert got == [
        {"day": D10, "operations": 3, "failed": 1, "retries": 2, "failing_now": 0},
        {"day": D11, "operations": 3, "failed": 1, "retries": 1, "failing_now": 1},
        {"day": D12, "operations": 6, "failed": 1, "retries": 1, "failing_now": 1},
    ]


def test_failed_operations(con: Any) -> None:
    got = rows(con, "SELECT id, status, failures_count, error FROM failed_operations")
    assert got == [
        {"id": "o8", "status": "error", "failures_count": 1, "error": ERR_CAPACITY},
        {"id": "o5", "status": "failed", "failures_count": 1, "error": ERR_POD},
    ]


def test_retried_operations(con: Any) -> None:
    got = rows(con, "SELECT id, failures_count, versions, status FROM retried_operations")
    assert got == [
        {"id": "o3", "failures_count": 2, "versions": 3, "status": "finished"},
        {"id": "o8", "failures_count": 1, "versions": 1, "status": "error"},
        {"id": "o5", "failures_count": 1, "versions": 2, "status": "failed"},
    ]


def test_latest_errors(con: Any) -> None:
    got = rows(con, "SELECT id, status, error, error_at, version FROM latest_errors")
    assert got == [
        {"id": "o8", "status": "error", "error": ERR_CAPACITY, "error_at": at(12, 9, 0, 4)}
        | {"version": 1},
        {"id": "o5", "status": "failed", "error": ERR_POD, "error_at": at(11, 10, 0, 5)}
        | {"version": 2},
        # o3's error was cleared by the successful retry: found in its version 2.
        {"id": "o3", "status": "finished", "error": ERR_TIMEOUT, "error_at": at(10, 12, 0, 5)}
        | {"version": 2},
    ]


def test_error_texts(con: Any) -> None:
    got = rows(con, "SELECT error, operations, actions, last_seen FROM error_texts")
    assert got == [
        {"error": ERR_CAPACITY, "operations": 1, "actions": ["start_compute"]}
        | {"last_seen": at(12, 9, 0, 4)},
        {"error": ERR_POD, "operations": 1, "actions": ["suspend_compute"]}
        | {"last_seen": at(11, 10, 0, 5)},
        {"error": ERR_TIMEOUT, "operations": 1, "actions": ["start_compute"]}
        | {"last_seen": at(10, 12, 0, 5)},
    ]


def test_duration_by_action(con: Any) -> None:
    # Terminal only: start_compute o1 o3 o4 o10 (o8 error, o12 scheduling are not over).
    assert [approx(r) for r in rows(con, "FROM duration_by_action")] == [
        {"action": "start_compute", "operations": 4, "with_duration": 4}
        | {"p50_ms": 250.0, "p90_ms": 370.0, "p99_ms": 397.0, "max_ms": 400}
        | {"wall_p50_ms": 2500.0, "wall_p90_ms": 7900.0, "wall_p99_ms": 9790.0}
        | {"wall_max_ms": 10000},
        {"action": "create_branch", "operations": 2, "with_duration": 2}
        | {"p50_ms": 10.0, "p90_ms": 18.0, "p99_ms": 19.8, "max_ms": 20}
        | {"wall_p50_ms": 500.0, "wall_p90_ms": 900.0, "wall_p99_ms": 990.0, "wall_max_ms": 1000},
        {"action": "suspend_compute", "operations": 2, "with_duration": 2}
        | {"p50_ms": 55.0, "p90_ms": 59.0, "p99_ms": 59.9, "max_ms": 60}
        | {"wall_p50_ms": 1500.0, "wall_p90_ms": 1900.0, "wall_p99_ms": 1990.0}
        | {"wall_max_ms": 2000},
    ]


def test_duration_by_day(con: Any) -> None:
    got = rows(con, "SELECT day, action, operations, p50_ms, max_ms FROM duration_by_day")
    assert [approx(r) for r in got] == [
        {"day": D10, "action": "start_compute", "operations": 2, "p50_ms": 200.0, "max_ms": 300},
        {"day": D10, "action": "suspend_compute", "operations": 1, "p50_ms": 50.0, "max_ms": 50},
        {"day": D11, "action": "create_branch", "operations": 1, "p50_ms": 20.0, "max_ms": 20},
        {"day": D11, "action": "start_compute", "operations": 1, "p50_ms": 200.0, "max_ms": 200},
        {"day": D12, "action": "create_branch", "operations": 1, "p50_ms": 0.0, "max_ms": 0},
        {"day": D12, "action": "start_compute", "operations": 1, "p50_ms": 400.0, "max_ms": 400},
        {"day": D12, "action": "suspend_compute", "operations": 1, "p50_ms": 60.0, "max_ms": 60},
    ]


def test_action_mix_includes_unknown_actions(con: Any) -> None:
    assert [approx(r) for r in rows(con, "FROM action_mix")] == [
        {"action": "start_compute", "operations": 6, "share": 0.5},
        {"action": "suspend_compute", "operations": 3, "share": 0.25},
        {"action": "create_branch", "operations": 2, "share": 2 / 12},
        {"action": "lfc_autoresize", "operations": 1, "share": 1 / 12},
    ]


def test_action_mix_by_day(con: Any) -> None:
    got = [approx(r) for r in rows(con, "FROM action_mix_by_day")]
    assert got == [
        {"day": D10, "action": "start_compute", "operations": 2, "share": 2 / 3},
        {"day": D10, "action": "suspend_compute", "operations": 1, "share": 1 / 3},
        {"day": D11, "action": "create_branch", "operations": 1, "share": 1 / 3},
        {"day": D11, "action": "start_compute", "operations": 1, "share": 1 / 3},
        {"day": D11, "action": "suspend_compute", "operations": 1, "share": 1 / 3},
        {"day": D12, "action": "start_compute", "operations": 3, "share": 0.5},
        {"day": D12, "action": "create_branch", "operations": 1, "share": 1 / 6},
        {"day": D12, "action": "lfc_autoresize", "operations": 1, "share": 1 / 6},
        {"day": D12, "action": "suspend_compute", "operations": 1, "share": 1 / 6},
    ]


def test_action_mix_by_project(con: Any) -> None:
    got = [approx(r) for r in rows(con, "FROM action_mix_by_project")]
    assert got == [
        {"project_id": "p1", "action": "start_compute", "operations": 4, "share": 4 / 7},
        {"project_id": "p1", "action": "suspend_compute", "operations": 2, "share": 2 / 7},
        {"project_id": "p1", "action": "lfc_autoresize", "operations": 1, "share": 1 / 7},
        {"project_id": "p2", "action": "create_branch", "operations": 2, "share": 0.4},
        {"project_id": "p2", "action": "start_compute", "operations": 2, "share": 0.4},
        {"project_id": "p2", "action": "suspend_compute", "operations": 1, "share": 0.2},
    ]


def test_status_mix_includes_unknown_statuses(con: Any) -> None:
    got = rows(con, "SELECT status, terminal, operations FROM status_mix")
    assert got == [
        {"status": "finished", "terminal": True, "operations": 6},
        {"status": "cancelled", "terminal": True, "operations": 1},
        {"status": "error", "terminal": False, "operations": 1},
        {"status": "failed", "terminal": False, "operations": 1},
        {"status": "scheduling", "terminal": False, "operations": 1},
        {"status": "skipped", "terminal": True, "operations": 1},
        {"status": "waiting_for_quorum", "terminal": False, "operations": 1},
    ]


def test_stuck_operations(con: Any) -> None:
    # Every non-terminal operation of 2025 is older than an hour now: failed is not terminal.
    got = rows(con, "SELECT id, status FROM stuck_operations")
    assert got == [
        {"id": "o5", "status": "failed"},
        {"id": "o7", "status": "waiting_for_quorum"},
        {"id": "o8", "status": "error"},
        {"id": "o12", "status": "scheduling"},
    ]


def test_stuck_operations_older_than(con: Any) -> None:
    as_of = "TIMESTAMPTZ '2025-01-12 12:30:00+00'"
    one_hour = rows(
        con, f"SELECT id, age FROM stuck_operations_older_than(INTERVAL 1 HOUR, as_of := {as_of})"
    )
    assert one_hour == [
        {"id": "o5", "age": dt.timedelta(days=1, hours=2, minutes=30)},
        {"id": "o7", "age": dt.timedelta(hours=4, minutes=30)},
        {"id": "o8", "age": dt.timedelta(hours=3, minutes=30)},
    ]
    four = rows(
        con, f"SELECT id FROM stuck_operations_older_than(INTERVAL 4 HOURS, as_of := {as_of})"
    )
    assert four == [{"id": "o5"}, {"id": "o7"}]


def test_compute_start_latency(con: Any) -> None:
    # Finished start_compute with a duration: 100, 200, 300, 400.
    assert [approx(r) for r in rows(con, "FROM compute_start_latency")] == [
        {"operations": 4, "min_ms": 100, "p50_ms": 250.0, "p90_ms": 370.0, "p99_ms": 397.0}
        | {"max_ms": 400, "mean_ms": 250.0}
    ]


def test_compute_start_latency_histogram(con: Any) -> None:
    assert rows(con, "FROM compute_start_latency_histogram") == [
        {"bucket": 7, "from_ms": 64, "to_ms": 128, "operations": 1},
        {"bucket": 8, "from_ms": 128, "to_ms": 256, "operations": 1},
        {"bucket": 9, "from_ms": 256, "to_ms": 512, "operations": 2},
    ]


def test_compute_start_latency_by_day(con: Any) -> None:
    got = [approx(r) for r in rows(con, "FROM compute_start_latency_by_day")]
    assert got == [
        {"day": D10, "operations": 2, "p50_ms": 200.0, "p90_ms": 280.0, "p99_ms": 298.0}
        | {"max_ms": 300},
        {"day": D11, "operations": 1, "p50_ms": 200.0, "p90_ms": 200.0, "p99_ms": 200.0}
        | {"max_ms": 200},
        {"day": D12, "operations": 1, "p50_ms": 400.0, "p90_ms": 400.0, "p99_ms": 400.0}
        | {"max_ms": 400},
    ]


def test_compute_cycles(con: Any) -> None:
    # ep1: start o1, suspend o2, start o3 (a cycle, Jan 10); start o8, suspend o11, start o10
    # (a cycle, Jan 12). ep2: start o4, suspend o5 (Jan 11), start o12 (a cycle, Jan 12).
    assert rows(con, "FROM compute_cycles") == [
        {"endpoint_id": "ep1", "project_id": "p1", "day": D10, "suspends": 1, "starts": 2}
        | {"cycles": 1},
        {"endpoint_id": "ep2", "project_id": "p2", "day": D11, "suspends": 1, "starts": 1}
        | {"cycles": 0},
        {"endpoint_id": "ep1", "project_id": "p1", "day": D12, "suspends": 1, "starts": 2}
        | {"cycles": 1},
        {"endpoint_id": "ep2", "project_id": "p2", "day": D12, "suspends": 0, "starts": 1}
        | {"cycles": 1},
    ]


def test_every_view_answers_on_an_empty_data_dir(tmp_path: Path, data_dir: Path) -> None:
    full, empty = connect(data_dir), connect(tmp_path)
    try:
        for name in list_views():
            expected = full.execute(f"DESCRIBE {name}").fetchall()
            assert empty.execute(f"DESCRIBE {name}").fetchall() == expected, name
            count = empty.execute(f"SELECT count(*) FROM {name}").fetchone()
            # compute_start_latency is one aggregate row even over nothing.
            assert count == ((1,) if name == "compute_start_latency" else (0,)), name
        assert empty.execute("FROM report_by_action()").fetchall() == []
    finally:
        full.close()
        empty.close()


def test_sql_files_run_as_written_from_the_data_dir(
    data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A person can `cd <data-dir>` and .read the files: the relative paths resolve there."""
    import duckdb

    from exporter.analytics.views import sql_files

    monkeypatch.chdir(data_dir)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    for path in sql_files():
        con.execute(path.read_text())
    assert con.execute("SELECT count(*) FROM operations").fetchone() == (12,)
    assert con.execute("SELECT operations FROM action_mix LIMIT 1").fetchone() == (6,)


def test_vocabulary_macros(con: Any) -> None:
    """The SQL vocabulary of 00_base.sql, and `is_terminal` agrees with the sync's Python."""
    from exporter.store.state import TERMINAL_STATUSES

    statuses = [
        "finished", "cancelled", "skipped", "running", "scheduling", "failed", "error",
        "cancelling", "waiting_for_quorum", None,
    ]  # fmt: skip
    for status in statuses:
        terminal, failing = con.execute(
            "SELECT is_terminal(?::VARCHAR), is_failing(?::VARCHAR)", [status, status]
        ).fetchone()
        assert terminal is (status in TERMINAL_STATUSES), status
        assert failing is (status in ("failed", "error")), status
    failed = [
        con.execute("SELECT is_failed(?::BIGINT)", [n]).fetchone()[0] for n in (None, 0, 1, 7)
    ]
    assert failed == [False, False, True, True]
    assert con.execute(
        "SELECT wall_ms(TIMESTAMPTZ '2025-01-10 12:00:00Z', TIMESTAMPTZ '2025-01-10 12:00:01.2399Z')"
    ).fetchone() == (1239,)
