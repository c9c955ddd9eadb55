"""`opsaudit status` and `opsaudit compact` through the CLI."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from click.testing import CliRunner

from exporter.cli import cli

from .conftest import run_sync


def test_status_reports_checkpoints_open_operations_and_runs(make_sim: Any, tmp_path: Path) -> None:
    sim = make_sim(seed=41, projects=3, days=1, ops_per_project_per_day=100)
    run_sync(sim, tmp_path)
    sim.advance(30)
    second = run_sync(sim, tmp_path)
    result = CliRunner().invoke(cli, ["status", "--data-dir", str(tmp_path), "--format", "json"])
    assert result.exit_code == 0, result.output
    status = json.loads(result.output)
    truth = sim.ground_truth()
    assert sorted(p["id"] for p in status["projects"]) == sorted(sim.project_ids())
    open_by_project: dict[str, int] = {}
    for op in truth.values():
        if op["status"] not in ("finished", "cancelled", "skipped"):
            open_by_project[op["project_id"]] = open_by_project.get(op["project_id"], 0) + 1
    for p in status["projects"]:
        assert p["open_operations"] == open_by_project.get(p["id"], 0)
        newest = max(o["created_at"] for o in truth.values() if o["project_id"] == p["id"])
        assert p["checkpoint_at"].replace(" ", "T").startswith(newest.rstrip("Z"))
        assert p["deleted"] is False and p["last_error"] is None
    assert [r["outcome"] for r in status["runs"]] == ["ok", "ok"]
    assert status["runs"][0]["run_id"] == second.run_id


def test_status_without_data_is_a_clear_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["status", "--data-dir", str(tmp_path)])
    assert result.exit_code == 6
    assert "run `opsaudit sync` first" in result.output


def test_status_of_an_account_without_projects_claims_no_coverage(
    make_sim: Any, tmp_path: Path
) -> None:
    """An account with no projects at all said '0 projects, 100% walked within the hour, 100%
    within the day' (0/0 taken for 1, in sync_runs too): no projects, no share of them."""
    sim = make_sim(seed=43, projects=0, shared_projects=0, orgs=1, days=1)
    assert run_sync(sim, tmp_path).exit_code == 0
    table = CliRunner().invoke(cli, ["status", "--data-dir", str(tmp_path)])
    assert table.exit_code == 0, table.output
    assert table.output.splitlines()[0] == (
        "coverage: no projects; 0 open operation(s) not re-read for a day"
    )
    result = CliRunner().invoke(cli, ["status", "--data-dir", str(tmp_path), "--format", "json"])
    assert json.loads(result.output)["coverage"] == {
        "projects": 0,
        "synced_within_hour": None,
        "synced_within_day": None,
        "oldest_lag_seconds": None,
        "open_not_reread_within_day": 0,
        "open_by_last_read": {"1h": 0, "6h": 0, "24h": 0, "7d": 0, "older": 0},
    }
    runs = pq.read_table(tmp_path / "sync_runs" / "sync_runs.parquet")
    assert runs.select(["coverage_hour", "coverage_day"]).to_pylist() == [
        {"coverage_hour": None, "coverage_day": None}
    ]


def test_compact_command(make_sim: Any, tmp_path: Path, monkeypatch: Any) -> None:
    from exporter.store.local import dataset as _storage

    monkeypatch.setattr(_storage, "COMPACT_MIN_FILES", 8)
    sim = make_sim(seed=42, projects=1, days=1, ops_per_project_per_day=50)
    pid = sim.project_ids()[0]
    for _ in range(9):  # nine runs, each adding a file to today's partition
        sim.advance(60)
        sim.add_operations(pid, 3)
        run_sync(sim, tmp_path, compact=False)
    part_files = lambda: sorted(tmp_path.glob("operation_versions/*/*.parquet"))  # noqa: E731
    # Each run's commit also wrote a summary file of the month (the report's summary record),
    # merged too (SUMMARY_MERGE_FILES: 8).
    summary_files = lambda: sorted(tmp_path.glob("summary/*.parquet"))  # noqa: E731
    before, summaries = len(part_files()), len(summary_files())
    result = CliRunner().invoke(cli, ["compact", "--data-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    removed = int(result.output.split()[3])
    assert result.output == f"compaction merged away {removed} file(s)\n"
    assert before - len(part_files()) >= 8 and summaries - len(summary_files()) >= 8
    assert removed == before - len(part_files()) + summaries - len(summary_files())


def test_a_stray_file_is_named_by_status_and_ignored_by_query_and_report(
    make_sim: Any, tmp_path: Path
) -> None:
    """Issue 15: the file a `COPY ... TO` once wrote among the data (before `query` refused
    writes) breaks no reader, and `status` names it."""
    import duckdb

    sim = make_sim(seed=140, projects=2, shared_projects=0, days=1, ops_per_project_per_day=40)
    env = {"NEON_API_KEY": sim.personal_key}
    runner = CliRunner()
    args = ["--data-dir", str(tmp_path)]
    done = runner.invoke(
        cli, ["sync", *args, "--base-url", sim.base_url, "--max-rps", "0"], env=env
    )
    assert done.exit_code == 0, done.output
    month = sorted((tmp_path / "operation_versions").iterdir())[0]
    stray = month / "zz.parquet"
    duckdb.sql(f"COPY (SELECT 1 AS x) TO '{stray}' (FORMAT parquet)")
    count = runner.invoke(
        cli, ["query", *args, "--format", "csv", "SELECT count(*) FROM operations"]
    )
    assert count.exit_code == 0, count.output
    assert count.output.splitlines()[-1] == str(len(sim.ground_truth()))
    report = runner.invoke(cli, ["report", *args, "--format", "json"])
    assert report.exit_code == 0, report.output
    status = runner.invoke(cli, ["status", *args, "--format", "json"])
    relative = stray.relative_to(tmp_path).as_posix()
    assert json.loads(status.output)["stray_files"] == [relative]
    text = runner.invoke(cli, ["status", *args])
    assert f"are never read (remove them): {relative}" in text.output


def test_a_run_whose_process_is_gone_shows_as_killed_not_running(
    make_sim: Any, tmp_path: Path
) -> None:
    """A sync killed (kill -9) leaves its run `running` until the next sync's recovery: status
    and doctor show it killed once the process the lock file names is gone (they showed it
    running while doctor said the lock was free); a run whose process lives is running."""
    import os
    import sqlite3
    import subprocess
    import sys

    sim = make_sim(seed=3, projects=1, shared_projects=0, orgs=1, days=1)
    assert run_sync(sim, tmp_path).outcome == "ok"
    con = sqlite3.connect(tmp_path / "state.sqlite")
    with con:
        con.execute("UPDATE runs SET outcome = 'running', finished_us = NULL")
    con.close()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    for pid, shown in ((int(gone.stdout), "killed"), (os.getpid(), "running")):
        (tmp_path / ".lock").write_text(f"{pid}\n")
        result = CliRunner().invoke(
            cli, ["status", "--data-dir", str(tmp_path), "--format", "json"]
        )
        assert result.exit_code == 0, result.output
        assert [r["outcome"] for r in json.loads(result.stdout)["runs"]] == [shown]
        doctor = CliRunner().invoke(
            cli, ["doctor", "--data-dir", str(tmp_path)], env={"NEON_API_KEY": ""}
        )
        assert f": {shown}" in doctor.output, doctor.output


def test_sync_runs_and_the_report_show_a_killed_run_killed(make_sim: Any, tmp_path: Path) -> None:
    """A sync killed with kill -9 was missing from `sync_runs` (rewritten at the end of a run)
    and the report's last run was the one before, `ok`, until the next sync, while `status`,
    `check` and the metrics said `killed`. The view takes the state's runs as `status` settles
    them (`store.state.settled_runs`): killed once the process is gone."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.ops.conftest import state_rows

    sim = make_sim(seed=12, projects=3, shared_projects=0, orgs=1, days=1)
    data_dir = tmp_path / "data"
    env = {"NEON_API_KEY": sim.personal_key, "OPSAUDIT_BASE_URL": sim.base_url}
    args = ["--data-dir", str(data_dir)]
    assert CliRunner().invoke(cli, ["sync", *args, "--max-rps", "0"], env=env).exit_code == 0
    slow = subprocess.Popen(
        [sys.executable, "-m", "exporter", "sync", *args, "--max-rps", "1"],
        env={**os.environ, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not state_rows(data_dir, "SELECT 1 FROM runs WHERE outcome = 'running'"):
            assert time.monotonic() < deadline and slow.poll() is None
            time.sleep(0.05)
    finally:
        slow.send_signal(signal.SIGKILL)
        slow.wait()
    [(first, _), (killed, started_us)] = state_rows(
        data_dir, "SELECT run_id, started_us FROM runs ORDER BY started_us"
    )
    # A process of its own, as a user runs it (DuckDB set up for Arrow there by us).
    query = subprocess.run(
        [sys.executable, "-m", "exporter", "query", *args, "--format", "json",
         "SELECT run_id, outcome, finished_at IS NULL AS unfinished FROM sync_runs "
         "ORDER BY started_at"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert query.returncode == 0, query.stderr
    assert json.loads(query.stdout) == [
        {"run_id": first, "outcome": "ok", "unfinished": False},
        {"run_id": killed, "outcome": "killed", "unfinished": True},
    ]
    report = CliRunner().invoke(cli, ["report", *args, "--format", "json"])
    assert report.exit_code == 0, report.output
    fresh = json.loads(report.stdout)["freshness"]
    assert fresh["last_run_outcome"] == "killed"
    started = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(
        microseconds=started_us
    )
    text = CliRunner().invoke(cli, ["report", *args])
    [data] = [line for line in text.stdout.splitlines() if line.startswith("Data ")]
    assert data.endswith(f"; last run started {started:%Y-%m-%dT%H:%M:%SZ}: killed"), data


def test_sync_runs_read_as_a_run_ends_between_the_state_reads(
    make_sim: Any, tmp_path: Path, monkeypatch: Any
) -> None:
    """The reader asks the state whether a run is `running`, then reads the runs: a sync that
    ended between the two (its `finish_run` committed) left no run to add, and the view was
    `VALUES ()`: every `opsaudit query` and `report` at that moment failed, exit 7 (Parser
    Error). The runs are then those of the file."""
    from exporter.store.state import StateDB

    sim = make_sim(seed=13, projects=2, shared_projects=0, orgs=1, days=1)
    first = run_sync(sim, tmp_path)
    state_file = tmp_path / "state.sqlite"
    writer = StateDB(state_file)
    writer.start_run("20990101T000000Z-ending", 4_000_000_000_000_000)  # a sync under way
    read_runs = StateDB.runs_rows

    def ended_meanwhile(self: StateDB) -> Any:
        if self is not writer and writer.has_running_run():  # the sync ends now
            writer.finish_run("20990101T000000Z-ending", 4_000_000_001_000_000, outcome="ok")
        return read_runs(self)

    monkeypatch.setattr(StateDB, "runs_rows", ended_meanwhile)
    try:
        result = CliRunner().invoke(
            cli,
            ["query", "--data-dir", str(tmp_path), "--format", "jsonl",
             "SELECT run_id, outcome FROM sync_runs ORDER BY started_at"],
        )  # fmt: skip
    finally:
        writer.close()
    assert result.exit_code == 0, result.output
    assert result.output == f'{{"run_id":"{first.run_id}","outcome":"ok"}}\n'
