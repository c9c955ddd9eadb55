"""`opsaudit check`: a dataset built to trip each finding, the exact lines, and exit 8."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from exporter.core.errors import ConfigError
from exporter.ops.check import Threshold, parse_threshold, run_check

from .conftest import (
    analytics_dataset,
    at_us,
    invoke,
    iso,
    run_sync,
    stamp,
    state_rows,
    state_write,
    write_versions,
)

TERMINAL = ("finished", "cancelled", "skipped")


@pytest.fixture
def trail(make_sim: Any, tmp_path: Path) -> tuple[Any, Path, dt.datetime]:
    """Three projects synced once: the simulator, the data dir, and when the run finished.
    The simulated history (a day) ends now, as a real account's does."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sim = make_sim(seed=5, projects=3, shared_projects=0, orgs=1, start=now)
    data_dir = tmp_path / "data"
    summary = run_sync(sim, data_dir)
    assert summary.outcome == "ok"
    [(finished,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    return sim, data_dir, at_us(finished)


def synced_at(data_dir: Path) -> dict[str, dt.datetime]:
    return {
        pid: at_us(us)
        for pid, us in state_rows(data_dir, "SELECT id, last_synced_us FROM projects ORDER BY id")
    }


def test_a_fresh_trail_has_no_findings(trail: tuple[Any, Path, dt.datetime]) -> None:
    _, data_dir, finished = trail
    as_of = finished + dt.timedelta(minutes=10)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    assert (result.exit_code, result.stdout) == (
        0,
        "ok: last successful sync 10m ago, 3 projects, no findings\n",
    )


def test_stale_sync_and_projects_not_synced(trail: tuple[Any, Path, dt.datetime]) -> None:
    _, data_dir, finished = trail
    as_of = finished + dt.timedelta(hours=3, minutes=5)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    expected = [
        f"stale_sync: last successful sync finished {stamp(finished)} (3h 5m ago), longer ago "
        "than --max-age 2h"
    ]
    for pid, last in synced_at(data_dir).items():
        ago = as_of - last
        minutes = int(ago.total_seconds()) // 60
        expected.append(
            f"project_not_synced: project {pid} last synced {stamp(last)} "
            f"({minutes // 60}h {minutes % 60}m ago), longer ago than --max-age 2h"
        )
    assert result.exit_code == 8
    assert result.stdout.splitlines() == expected
    # A wider --max-age: nothing to say.
    wide = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of), "--max-age", "4h")
    assert wide.exit_code == 0, wide.stdout


def test_failing_project(trail: tuple[Any, Path, dt.datetime]) -> None:
    sim, data_dir, _ = trail
    failing = sorted(sim.project_ids())[1]
    sim.fail_requests(f"/projects/{failing}/operations", 400)
    second = run_sync(sim, data_dir)
    assert second.outcome == "partial"
    [(error,)] = state_rows(data_dir, "SELECT last_error FROM projects WHERE id = ?", (failing,))
    assert error and "scripted failure 400" in error
    [(finished,)] = state_rows(data_dir, "SELECT max(finished_us) FROM runs")
    as_of = at_us(finished) + dt.timedelta(minutes=1)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    assert result.exit_code == 8
    [(run_error,)] = state_rows(
        data_dir, "SELECT error FROM runs WHERE finished_us = ?", (finished,)
    )
    # The first (ok) run is 2h old at most; the project synced then is within --max-age. The
    # last run ended partial.
    assert result.stdout.splitlines() == [
        f"last_run_failed: the last sync, finished {stamp(at_us(finished))} (1m ago), ended "
        f"partial: {run_error}",
        f"project_error: project {failing} failed its last sync: {error}",
    ]
    assert run_error == f"{failing}: {error}"


def last_run(data_dir: Path) -> tuple[dt.datetime, str | None]:
    """When the last run (by start) finished, and its error as stored."""
    [(finished, error)] = state_rows(
        data_dir, "SELECT finished_us, error FROM runs ORDER BY started_us DESC LIMIT 1"
    )
    return at_us(finished), error


def test_a_failed_last_run_is_a_finding_until_a_run_succeeds(
    trail: tuple[Any, Path, dt.datetime],
) -> None:
    """`check` said ok (exit 0) after a failed run (a refused listing: exit 5, or 1 beside other
    organizations), a revoked key (auth_failed, exit 3) or a kill -9, until --max-age passed: it
    never read the last run's outcome. A run that stopped on purpose (budget) is no finding."""
    sim, data_dir, _ = trail
    args = ["check", "--data-dir", str(data_dir), "--max-age", "1d", "--as-of"]
    # The organization's listing refused: a project created there is never found.
    sim.fail_requests(f"/projects?org_id={sim.org_ids[0]}", 403)
    assert run_sync(sim, data_dir).outcome == "failed"
    finished, error = last_run(data_dir)
    assert error and "scripted failure 403" in error
    result = invoke(*args, iso(finished + dt.timedelta(minutes=1)))
    assert (result.exit_code, result.stdout.splitlines()) == (
        8,
        [
            f"last_run_failed: the last sync, finished {stamp(finished)} (1m ago), ended "
            f"failed: {error}"
        ],
    )
    # The key revoked: a day of auth_failed runs.
    sim.clear_failures()
    sim.revoke_key(sim.personal_key)
    assert run_sync(sim, data_dir).outcome == "auth_failed"
    finished, error = last_run(data_dir)
    assert error and "rejected" in error
    result = invoke(*args, iso(finished + dt.timedelta(hours=23)))
    assert (result.exit_code, result.stdout.splitlines()) == (
        8,
        [
            f"last_run_failed: the last sync, finished {stamp(finished)} (23h ago), ended "
            f"auth_failed: {error}"
        ],
    )
    # A run killed with kill -9 (still `running`, the pid in the lock file gone), as `status`
    # settles it.
    started = finished + dt.timedelta(milliseconds=1)
    state_write(
        data_dir,
        "INSERT INTO runs (run_id, started_us, outcome) VALUES ('k', ?, 'running')",
        (int(started.timestamp() * 1_000_000),),
    )
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    (data_dir / ".lock").write_text(dead + "\n")
    result = invoke(*args, iso(started + dt.timedelta(minutes=10)))
    assert (result.exit_code, result.stdout.splitlines()) == (
        8,
        [
            f"last_run_failed: the last sync, started {stamp(started)} (10m ago), ended killed "
            "(its process died before it finished: see the sync's log)"
        ],
    )
    # A budgeted run after it: no finding (ok as of its end).
    sim.world.revoked.clear()  # the key restored
    assert run_sync(sim, data_dir, max_requests=5).outcome == "budget"
    finished, _ = last_run(data_dir)
    result = invoke(*args, iso(finished + dt.timedelta(minutes=1)))
    assert (result.exit_code, result.stdout.startswith("ok: ")) == (0, True), result.stdout


def test_names_never_read_are_a_finding_once_older_than_max_age(
    trail: tuple[Any, Path, dt.datetime],
) -> None:
    """A project walked whose branches and endpoints were never listed (runs cut before them,
    a route a proxy lacks) has operations without names: `check` says so (it said ok)."""
    _, data_dir, finished = trail
    unnamed = sorted(synced_at(data_dir))[0]
    state_write(data_dir, "UPDATE projects SET names_read_us = NULL WHERE id = ?", (unnamed,))
    as_of = finished + dt.timedelta(minutes=10)
    soon = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    assert soon.exit_code == 0, soon.stdout  # first listed less than --max-age ago
    listed = int((finished - dt.timedelta(hours=3)).timestamp() * 1_000_000)
    state_write(data_dir, "UPDATE projects SET first_seen_us = ? WHERE id = ?", (listed, unnamed))
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    assert result.exit_code == 8
    assert result.stdout.splitlines() == [
        f"names_not_read: project {unnamed}: its branches and endpoints were never listed (its "
        "operations have no names) though it was first listed longer ago than --max-age; runs "
        "end before they are read: raise --time-budget or --max-requests"
    ]


def test_open_operations_not_reread(trail: tuple[Any, Path, dt.datetime]) -> None:
    sim, data_dir, finished = trail
    open_by_project: dict[str, int] = {}
    for op in sim.ground_truth().values():
        if op["status"] not in TERMINAL:
            open_by_project[op["project_id"]] = open_by_project.get(op["project_id"], 0) + 1
    assert len(open_by_project) == 3  # every project has some (the test needs them)
    checked = {
        pid: at_us(us)
        for pid, us in state_rows(
            data_dir, "SELECT project_id, min(checked_us) FROM open_ops GROUP BY project_id"
        )
    }
    # The default bound: the sync's --refresh-open-every (24h) plus an hour for the next run.
    as_of = finished + dt.timedelta(hours=26)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of), "--max-age", "2d")
    assert result.exit_code == 8
    assert result.stdout.splitlines() == [
        f"open_not_reread: project {pid}: {n} open operation(s) not re-read for more than 1d 1h "
        f"(oldest check {stamp(checked[pid])})"
        for pid, n in sorted(open_by_project.items())
    ]
    # The bound is an option.
    relaxed = invoke(
        "check",
        "--data-dir",
        str(data_dir),
        "--as-of",
        iso(as_of),
        "--max-age",
        "2d",
        "--reread-max-age",
        "2d",
    )
    assert relaxed.exit_code == 0, relaxed.stdout
    # The open operations by time since their last re-read: all between a day and a week.
    as_json = invoke(
        "check", "--data-dir", str(data_dir), "--as-of", iso(as_of), "--format", "json"
    )
    total = sum(open_by_project.values())
    assert orjson.loads(as_json.stdout)["open_by_last_read"] == {
        "1h": 0,
        "6h": 0,
        "24h": 0,
        "7d": total,
        "older": 0,
    }


def test_retention_gap_between_runs_and_since_the_last(
    trail: tuple[Any, Path, dt.datetime],
) -> None:
    _, data_dir, finished = trail
    [(started_us,)] = state_rows(data_dir, "SELECT started_us FROM runs")
    # A run 200 days before the real one: the platform may have deleted what came in between.
    old_start = started_us - 200 * 86_400_000_000
    state_write(
        data_dir,
        "INSERT INTO runs (run_id, started_us, finished_us, outcome) VALUES ('old', ?, ?, 'ok')",
        (old_start, old_start + 60_000_000),
    )
    gap = at_us(started_us) - at_us(old_start + 60_000_000)
    as_of = finished + dt.timedelta(days=190)
    args = ["--max-age", "400d", "--reread-max-age", "400d"]
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of), *args)
    assert result.exit_code == 8
    hours = int(gap.total_seconds() // 3600) % 24
    assert result.stdout.splitlines() == [
        f"retention_gap: {gap.days}d {hours}h between the runs that finished "
        f"{stamp(at_us(old_start + 60_000_000))} and started {stamp(at_us(started_us))}: longer "
        "than the platform keeps operations (about 6 months); some may have been deleted unseen",
        f"retention_gap: the last run that synced finished {stamp(finished)}, longer ago than "
        "the platform keeps operations (about 6 months): run `opsaudit sync` now",
    ]


def test_retention_coverage(trail: tuple[Any, Path, dt.datetime]) -> None:
    sim, data_dir, _ = trail
    pid = sorted(sim.project_ids())[0]
    oldest = min(op["created_at"] for op in sim.ground_truth().values() if op["project_id"] == pid)
    oldest_at = dt.datetime.fromisoformat(oldest.replace("Z", "+00:00"))
    # The project's first backfill has not completed (a walk in progress, newest first) ...
    state_write(
        data_dir,
        "UPDATE projects SET last_synced_us = NULL, checkpoint_us = NULL, "
        "resume_cursor = 'c' WHERE id = ?",
        (pid,),
    )
    args = ["--max-age", "1000w", "--reread-max-age", "1000w"]
    # ... while what it has read is still far from the retention horizon: only "never synced".
    early = oldest_at + dt.timedelta(days=150)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(early), *args)
    assert result.stdout.splitlines() == [
        f"project_not_synced: project {pid} has never completed a sync"
    ]
    # 170 days after its oldest stored operation, the rest of its history is being deleted.
    late = oldest_at + dt.timedelta(days=170)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(late), *args)
    assert result.exit_code == 8
    assert result.stdout.splitlines() == [
        f"project_not_synced: project {pid} has never completed a sync",
        f"retention_coverage: project {pid}: its first backfill has not completed and has read "
        f"back to {stamp(oldest_at)}; the platform deletes operations after about 6 months "
        f"({stamp(late - dt.timedelta(days=182))}), so the rest of its history is being lost: "
        "let `opsaudit sync` finish (see its errors)",
    ]


THRESHOLD_ARGS = [
    "--as-of",
    "2025-01-12T14:00:00Z",
    "--fail-on",
    "failure_rate(start_compute) > 5% over 7d",
    "--fail-on",
    "failure_rate > 50% over 24h",
    "--fail-on",
    "stuck > 0",
    "--fail-on",
    "stuck(start_compute) >= 3",
]


def test_thresholds_on_the_data(tmp_path: Path) -> None:
    # The hand-computed dataset (tests/analytics/conftest.py), no state: never synced by us.
    data_dir = analytics_dataset(tmp_path / "data")
    result = invoke("check", "--data-dir", str(data_dir), *THRESHOLD_ARGS)
    assert result.exit_code == 8
    # start_compute created 2025-01-05 14:00 .. 01-12 14:00: o1 o3 o4 o8 o10 o12, failed o3 o8.
    # Not terminal an hour after creation, as of 01-12 14:00: o5 o7 o8 o12.
    assert result.stdout.splitlines() == [
        f"stale_sync: no sync has run in {data_dir} yet: run `opsaudit sync`",
        "threshold: failure rate of start_compute over the last 7d is 33.3% "
        "(failure_rate(start_compute) > 5% over 7d); most: start_compute failed 2 times on br-p1",
        "threshold: 4 operation(s) of all actions not terminal 1h after creation (stuck > 0)",
    ]


def test_a_threshold_count_carries_thousands_separators(tmp_path: Path) -> None:
    """ "threshold: 3194 operation(s) ...": no separators, unlike every other count."""
    start = dt.datetime(2025, 1, 12, tzinfo=dt.timezone.utc)
    specs = [
        (f"s{k}", "p1", "ep1", "start_compute", "running", 0, None, start, 1, None, 1)
        for k in range(1234)
    ]
    write_versions(tmp_path, specs, "run-1")
    args = ["--as-of", "2025-01-12T14:00:00Z", "--fail-on", "stuck > 0"]
    result = invoke("check", "--data-dir", str(tmp_path), *args)
    assert result.exit_code == 8
    assert result.stdout.splitlines()[1:] == [
        "threshold: 1,234 operation(s) of all actions not terminal 1h after creation (stuck > 0)"
    ]


def test_json_output(tmp_path: Path) -> None:
    data_dir = analytics_dataset(tmp_path / "data")
    result = invoke("check", "--data-dir", str(data_dir), "--format", "json", *THRESHOLD_ARGS)
    assert result.exit_code == 8
    report = json.loads(result.stdout)
    # created 01-11 14:00 .. 01-12 14:00: o7 o8 o9 o11 o10 o12; failed: o8.
    assert report["thresholds"] == [
        {"expression": "failure_rate(start_compute) > 5% over 7d", "value": 2 / 6},
        {"expression": "failure_rate > 50% over 24h", "value": 1 / 6},
        {"expression": "stuck > 0", "value": 4.0},
        {"expression": "stuck(start_compute) >= 3", "value": 2.0},
    ]
    assert report["status"] == "attention"
    assert report["as_of"] == "2025-01-12T14:00:00Z"
    assert [f["check"] for f in report["findings"]] == ["stale_sync", "threshold", "threshold"]
    assert report["findings"][2] == {
        "check": "threshold",
        "subject": "stuck > 0",
        "message": "4 operation(s) of all actions not terminal 1h after creation (stuck > 0)",
    }


def test_library_call(tmp_path: Path) -> None:
    data_dir = analytics_dataset(tmp_path / "data")
    report = run_check(
        data_dir,
        thresholds=[parse_threshold("stuck > 3")],
        stuck_after=dt.timedelta(hours=3),
        as_of=dt.datetime(2025, 1, 12, 14, tzinfo=dt.timezone.utc),
    )
    # Three hours: o12 (created 12:00) is not stuck yet.
    assert report.measured == {"stuck > 3": 3.0}
    assert [f.check for f in report.findings] == ["stale_sync"]


def test_stuck_over_a_window_lets_old_stuck_operations_age_out(tmp_path: Path) -> None:
    """Issue 23: `stuck > 0` never clears while a month-old operation stays open; `over 24h`
    counts only the stuck operations created in the window."""
    data_dir = analytics_dataset(tmp_path / "data")
    # As of 01-12 14:00, not terminal an hour after creation: o5 (created 01-11 10:00), o7
    # (01-12 08:00), o8 (01-12 09:00), o12 (01-12 12:00). Created in the last 5h: o8, o12.
    result = invoke(
        "check",
        "--data-dir",
        str(data_dir),
        "--as-of",
        "2025-01-12T14:00:00Z",
        "--fail-on",
        "stuck > 0 over 5h",
        "--fail-on",
        "stuck(lfc_autoresize) > 0 over 5h",
        "--fail-on",
        "stuck(suspend_compute) > 0 over 1d",
        "--format",
        "json",
    )
    assert result.exit_code == 8, result.output
    report = json.loads(result.stdout)
    assert report["thresholds"] == [
        {"expression": "stuck > 0 over 5h", "value": 2.0},  # o8, o12
        {"expression": "stuck(lfc_autoresize) > 0 over 5h", "value": 0.0},  # o7 is 6 h old
        {"expression": "stuck(suspend_compute) > 0 over 1d", "value": 0.0},  # o5 is 28 h old
    ]
    assert [f["message"] for f in report["findings"] if f["check"] == "threshold"] == [
        "2 operation(s) of all actions created in the last 5h not terminal 1h after creation "
        "(stuck > 0 over 5h)"
    ]


def test_an_unknown_action_is_a_usage_error_listing_the_known_ones(tmp_path: Path) -> None:
    data_dir = analytics_dataset(tmp_path / "data")
    result = invoke("check", "--data-dir", str(data_dir), "--fail-on", "stuck(start_compte) > 0")
    assert (result.exit_code, result.stdout) == (2, "")
    # The documented actions and those in the data (lfc_autoresize is undocumented).
    assert result.stderr == (
        "Error: --fail-on 'stuck(start_compte) > 0': unknown action 'start_compte'; known "
        "actions: apply_config, apply_storage_config, check_availability, create_branch, "
        "create_timeline, delete_tenant, lfc_autoresize, start_compute, suspend_compute, "
        "tenant_attach, tenant_detach, tenant_reattach, timeline_archive, timeline_unarchive\n"
    )
    known = invoke(
        "check",
        "--data-dir",
        str(data_dir),
        "--fail-on",
        "failure_rate(lfc_autoresize) > 5% over 1w",
    )
    assert "unknown action" not in known.stderr


def test_threshold_parser() -> None:
    assert parse_threshold(" failure_rate( apply_config ) >= 2.5 % over 90m ") == Threshold(
        text="failure_rate( apply_config ) >= 2.5 % over 90m",
        metric="failure_rate",
        action="apply_config",
        op=">=",
        value=0.025,
        window=dt.timedelta(minutes=90),
    )
    assert parse_threshold("stuck > 0") == Threshold("stuck > 0", "stuck", None, ">", 0)
    assert parse_threshold("stuck(x) >= 2 over 24h") == Threshold(
        "stuck(x) >= 2 over 24h", "stuck", "x", ">=", 2, dt.timedelta(hours=24)
    )
    for bad in (
        "failure_rate > 5 over 24h",  # no %
        "failure_rate(x) > 5% over 24x",
        "failure_rate(x) > 5%",  # no window
        "stuck = 0",
        "stuck > -1",
        "stuck > 0 and more",
        "stuck > 0 over",
        "stuck > 0 over 24x",
        "errors > 1",
        "",
    ):
        with pytest.raises(ConfigError, match="is not a threshold"):
            parse_threshold(bad)
    for zero, window in (("failure_rate > 5% over 0s", "0s"), ("stuck > 0 over 00 w", "00 w")):
        with pytest.raises(ConfigError) as err:
            parse_threshold(zero)
        assert str(err.value) == (
            f"--fail-on {zero!r}: the window {window!r} is no time at all, so it could never "
            "fire: give a duration above 0 (24h)"
        )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--fail-on", "stuck = 0"],
            "Invalid value for '--fail-on': 'stuck = 0' is not a threshold",
        ),
        (
            ["--fail-on", "failure_rate > 0% over 0d"],
            "Invalid value for '--fail-on': 'failure_rate > 0% over 0d': the window '0d' is no "
            "time at all, so it could never fire: give a duration above 0 (24h)\n",
        ),
        (
            ["--fail-on", "stuck(start_compute) > 0 over 0h"],
            "Invalid value for '--fail-on': 'stuck(start_compute) > 0 over 0h': the window '0h' "
            "is no time at all, so it could never fire: give a duration above 0 (24h)\n",
        ),
        (["--max-age", "2 hours"], "Invalid value for '--max-age': '2 hours' is not a duration"),
        (["--max-age", "0s"], "Invalid value for '--max-age': '0s' is no time at all"),
        (["--as-of", "yesterday"], "Invalid value for '--as-of': 'yesterday' is not an RFC 3339"),
    ],
)
def test_bad_arguments_are_usage_errors(tmp_path: Path, args: list[str], message: str) -> None:
    result = invoke("check", "--data-dir", str(tmp_path), *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_missing_data_dir_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("check", "--data-dir", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert result.stderr == (
        f"Error: --data-dir {tmp_path / 'nope'} does not exist; run `opsaudit sync --data-dir "
        f"{tmp_path / 'nope'}` first, or point --data-dir (or $OPSAUDIT_DATA_DIR) at an "
        "existing dataset\n"
    )
    assert not (tmp_path / "nope").exists()


@pytest.mark.parametrize(
    ("as_of", "says"),
    [
        ("0001-01-01T00:00:00Z", "is outside the years 1970 to 9998"),
        ("9999-12-31T23:59:59-05:00", "is not an RFC 3339 time (2025-01-31T12:00:00Z)"),
        # Taken before, the check judged two days away (`+53:00` typed for `+05:30`).
        ("2025-03-10T12:00:00+53:00", "has no such UTC offset: hours 00-23, minutes 00-59"),
        ("2025-03-10T12:00:00-05:60", "has no such UTC offset: hours 00-23, minutes 00-59"),
    ],
)
def test_an_as_of_at_the_end_of_the_calendar_is_a_usage_error(
    trail: tuple[Any, Path, dt.datetime], as_of: str, says: str
) -> None:
    """The windows reach back from it: year 1 less a day is no date, and the year 10000 none
    either (both exited 5, "a bug")."""
    _sim, data_dir, _ = trail
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", as_of)
    assert (result.exit_code, result.stdout) == (2, "")
    assert f"Invalid value for '--as-of': '{as_of}' {says}" in result.stderr


def test_the_json_has_the_same_keys_before_the_first_sync(
    trail: tuple[Any, Path, dt.datetime], tmp_path: Path
) -> None:
    """`open_by_last_read` was {} where no sync had run, its five buckets once one had."""
    _sim, data_dir, _ = trail
    (tmp_path / "empty").mkdir()
    shapes = []
    for where in (data_dir, tmp_path / "empty"):
        report = json.loads(invoke("check", "--data-dir", str(where), "--format", "json").stdout)
        shapes.append((sorted(report), sorted(report["open_by_last_read"])))
    assert shapes[0] == shapes[1]
    assert shapes[1][1] == ["1h", "24h", "6h", "7d", "older"]


def test_windows_reaching_past_the_first_date_find_nothing_older(
    trail: tuple[Any, Path, dt.datetime],
) -> None:
    """`--max-age 99999999d` reached past year 1 (exit 5, "a bug"): nothing is older."""
    _sim, data_dir, finished = trail
    huge = "99999999d"
    result = invoke(
        "check",
        "--data-dir",
        str(data_dir),
        "--as-of",
        iso(finished),
        "--max-age",
        huge,
        "--reread-max-age",
        huge,
        "--fail-on",
        f"failure_rate > 100% over {huge}",
    )
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        "ok: last successful sync 0s ago, 3 projects, no findings\n",
        "",
    )


def test_a_state_an_older_opsaudit_wrote_is_read_as_migrated_and_left_untouched(
    tmp_path: Path,
) -> None:
    """`check` and `status` on a dataset an older opsaudit wrote (state format 6: no names
    columns) before any sync migrated it said "unexpected error" (exit 5): they read the file as
    this version would after migrating it, and never write it."""
    from exporter import connect
    from exporter.ops.status import read_status, render_status
    from exporter.store.state import StateDB

    asset = Path(__file__).parents[1] / "assets" / "pre-superseded"
    old, migrated = tmp_path / "old", tmp_path / "migrated"
    for copy in (old, migrated):
        shutil.copytree(asset, copy)
    StateDB(migrated / "state.sqlite").close()  # what the next sync's open does
    before = (old / "state.sqlite").read_bytes()
    as_of = "2026-11-25T00:00:00Z"
    command = ["check", "--format", "json", "--as-of", as_of]
    results = [invoke(*command, "--data-dir", str(d)) for d in (old, migrated)]
    assert [r.exit_code for r in results] == [8, 8], results[0].output
    assert results[0].stdout.replace(str(old), str(migrated)) == results[1].stdout
    # status at one instant (its lags count from it)
    when = dt.datetime(2026, 11, 25, tzinfo=dt.timezone.utc)
    shown = [render_status(read_status(d, as_of=when), "json") for d in (old, migrated)]
    assert shown[0].replace(str(old), str(migrated)) == shown[1]
    assert (old / "state.sqlite").read_bytes() == before
    # Known current as of their last walks (state format 12), as its projects file says.
    projects = read_status(old).projects
    assert [p["current_at"] for p in projects] == [p["last_synced_at"] for p in projects]
    assert None not in [p["current_at"] for p in projects]
    con = connect(old)
    try:
        rows = con.execute("SELECT current_at, last_synced_at FROM projects").fetchall()
    finally:
        con.close()
    assert len(rows) == len(projects) and all(now == walk for now, walk in rows)


def test_a_run_of_one_project_does_not_make_the_whole_trail_current(
    trail: tuple[Any, Path, dt.datetime],
) -> None:
    """`sync --project X` exits 0 with the others stale: its ok made the trail current (no
    `stale_sync`, the last-success metric at now, both README alerts cleared). Only a run
    whose scope was the whole trail does (every live project current since it started)."""
    from exporter.ops.metrics import collect_metrics

    sim, data_dir, _ = trail
    hour = 3_600_000_000
    # The full run an hour earlier.
    state_write(
        data_dir,
        "UPDATE runs SET started_us = started_us - ?, finished_us = finished_us - ?",
        (hour, hour),
    )
    state_write(
        data_dir,
        "UPDATE projects SET first_seen_us = first_seen_us - ?1, last_seen_us = last_seen_us - ?1, "
        "last_synced_us = last_synced_us - ?1, current_us = current_us - ?1",
        (hour,),
    )
    [(full_end,)] = state_rows(data_dir, "SELECT finished_us FROM runs")
    one, *others = sorted(sim.project_ids())
    assert run_sync(sim, data_dir, project_ids=[one]).outcome == "ok"
    [(one_end,)] = state_rows(data_dir, "SELECT max(finished_us) FROM runs")
    as_of = at_us(one_end) + dt.timedelta(minutes=1)
    report = run_check(data_dir, max_age=dt.timedelta(minutes=30), as_of=as_of)
    assert report.last_success_at == at_us(full_end)
    assert [(f.check, f.subject) for f in report.findings] == [
        ("stale_sync", None),
        *(("project_not_synced", pid) for pid in others),
    ]
    [success] = [
        m.samples
        for m in collect_metrics(data_dir, as_of=as_of)
        if m.name == "opsaudit_last_success_timestamp_seconds"
    ]
    assert success == [({}, full_end / 1e6)]
    # The next full run makes it current again.
    assert run_sync(sim, data_dir).outcome == "ok"
    [(again,)] = state_rows(data_dir, "SELECT max(finished_us) FROM runs")
    assert run_check(data_dir, as_of=at_us(again)).last_success_at == at_us(again)


def test_a_deleted_projects_open_operations_are_not_stuck(make_sim: Any, tmp_path: Path) -> None:
    """A project deleted with operations still open kept them in `stuck_operations`, so
    `check --fail-on 'stuck > 0'` could never clear: nobody can re-read them (`open_not_reread`
    and the open-operations counts already left them out). They are not counted as stuck; the
    view lists them with `deleted := true`, `project_deleted_at` set."""
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    sim = make_sim(seed=5, projects=3, shared_projects=0, orgs=1, start=now)
    data_dir = tmp_path / "data"
    assert run_sync(sim, data_dir).outcome == "ok"
    open_by_project: dict[str, int] = {}
    for op in sim.ground_truth().values():
        if op["status"] not in TERMINAL:
            open_by_project[op["project_id"]] = open_by_project.get(op["project_id"], 0) + 1
    assert len(open_by_project) == 3  # every project has some (the test needs them)
    victim = sorted(open_by_project)[0]
    sim.delete_project(victim)
    assert run_sync(sim, data_dir).outcome == "ok"
    [(deleted_us,)] = state_rows(
        data_dir, "SELECT deleted_us FROM projects WHERE id = ?", (victim,)
    )
    assert deleted_us is not None
    live = sum(n for pid, n in open_by_project.items() if pid != victim)
    # Two hours on, every open operation is older than the hour `stuck` waits.
    as_of = dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=2)
    result = invoke(
        "check", "--data-dir", str(data_dir), "--as-of", iso(as_of), "--max-age", "1d",
        "--fail-on", "stuck > 0",
    )  # fmt: skip
    assert (result.exit_code, result.stdout) == (
        8,
        f"threshold: {live:,} operation(s) of all actions not terminal 1h after creation "
        "(stuck > 0)\n",
    )
    at = _timestamp(as_of)
    listed = invoke(
        "query", "--data-dir", str(data_dir), "--format", "json",
        "SELECT (SELECT count(*) FROM stuck_operations_older_than(INTERVAL 1 HOUR, "
        f"as_of := {at})) AS counted, (SELECT count(*) FROM stuck_operations_older_than("
        f"INTERVAL 1 HOUR, as_of := {at}, deleted := true) WHERE project_deleted_at = "
        f"make_timestamptz({deleted_us}) AND project_id = '{victim}') AS deleted",
    )  # fmt: skip
    assert listed.exit_code == 0, listed.output
    assert orjson.loads(listed.stdout) == [{"counted": live, "deleted": open_by_project[victim]}]


def _timestamp(when: dt.datetime) -> str:
    return f"TIMESTAMPTZ '{iso(when)}'"


def test_projects_a_scoped_run_left_out_say_so(trail: tuple[Any, Path, dt.datetime]) -> None:
    """A whole sync 3 hours ago, then `sync --project X` now: the other projects and the trail
    are stale, as before (a scoped run vouches for no other project), and the findings say why
    the runs since did not count, so the operator is not left to guess."""
    sim, data_dir, _ = trail
    _three_hours_ago(data_dir)
    kept = sorted(sim.project_ids())[0]
    assert run_sync(sim, data_dir, project_ids=[kept]).outcome == "ok"
    [(finished,)] = state_rows(data_dir, "SELECT max(finished_us) FROM runs")
    [(whole,)] = state_rows(data_dir, "SELECT min(finished_us) FROM runs")
    as_of = at_us(finished) + dt.timedelta(minutes=1)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    left_out = (
        "; the runs since left it out (`--project` or `--org-id`, a budget, or a listing that "
        "no longer shows it)"
    )
    expected = [
        f"stale_sync: last successful sync finished {stamp(at_us(whole))} "
        f"({_ago(as_of - at_us(whole))} ago), longer ago than --max-age 2h; the runs since did "
        "not cover every project (`--project` or `--org-id`, cut short by a budget or a stop, or "
        "a project failing)"
    ]
    for pid, last in synced_at(data_dir).items():
        if pid != kept:
            expected.append(
                f"project_not_synced: project {pid} last synced {stamp(last)} "
                f"({_ago(as_of - last)} ago), longer ago than --max-age 2h{left_out}"
            )
    assert (result.exit_code, result.stdout.splitlines()) == (8, expected)


def _three_hours_ago(data_dir: Path) -> None:
    """The trail's runs and walks moved 3 hours back, as if the last whole sync were that old."""
    three_hours = 3 * 3600 * 1_000_000
    for sql in (
        "UPDATE runs SET started_us = started_us - ?, finished_us = finished_us - ?",
        "UPDATE projects SET last_synced_us = last_synced_us - ?, current_us = current_us - ?",
    ):
        state_write(data_dir, sql, (three_hours, three_hours))


def _ago(delta: dt.timedelta) -> str:
    minutes = int(delta.total_seconds()) // 60
    return f"{minutes // 60}h {minutes % 60}m"


def test_a_project_failing_since_is_not_said_left_out(trail: tuple[Any, Path, dt.datetime]) -> None:
    """The runs since did walk it, and failed: its own error says why, not "left it out"."""
    sim, data_dir, _ = trail
    _three_hours_ago(data_dir)
    failing = sorted(sim.project_ids())[1]
    sim.fail_requests(f"/projects/{failing}/operations", 400)
    assert run_sync(sim, data_dir).outcome == "partial"
    [(finished,)] = state_rows(data_dir, "SELECT max(finished_us) FROM runs")
    [(last_us, error)] = state_rows(
        data_dir, "SELECT last_synced_us, last_error FROM projects WHERE id = ?", (failing,)
    )
    as_of = at_us(finished) + dt.timedelta(minutes=1)
    result = invoke("check", "--data-dir", str(data_dir), "--as-of", iso(as_of))
    assert result.exit_code == 8
    lines = [line for line in result.stdout.splitlines() if line.startswith("project_")]
    assert [line for line in lines if failing in line] == [
        f"project_not_synced: project {failing} last synced {stamp(at_us(last_us))} "
        f"({_ago(as_of - at_us(last_us))} ago), longer ago than --max-age 2h",
        f"project_error: project {failing} failed its last sync: {error}",
    ]
