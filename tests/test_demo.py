"""`opsaudit demo` end to end: sync, report, and next commands that work on the same data."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path
from typing import Any

import orjson
import pytest
from click.testing import CliRunner, Result

from exporter.cli import cli

pytestmark = pytest.mark.slow


def invoke(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)
    return result


def query(data_dir: Path, sql: str) -> list[dict[str, Any]]:
    result = invoke("query", "--data-dir", str(data_dir), "--format", "json", sql)
    assert result.exit_code == 0, result.output
    rows: list[dict[str, Any]] = orjson.loads(result.stdout)
    return rows


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Result]:
    """One small demo run (4 projects x 5 days), shared by the tests below."""
    data_dir = tmp_path_factory.mktemp("demo") / "data"
    result = invoke(
        "demo", "--data-dir", str(data_dir), "--projects", "4", "--days", "5", "--no-progress"
    )
    return data_dir, result


def test_demo_succeeds_and_says_what_next(demo: tuple[Path, Result]) -> None:
    data_dir, result = demo
    assert result.exit_code == 0, result.output
    assert "sync ok: 4/4 projects" in result.stderr
    out = result.stdout
    assert f"The dataset is in {data_dir}." in out
    assert "Next, try:" in out
    assert f"  (cd {data_dir} && duckdb opsaudit.duckdb)    # the DuckDB CLI" in out
    assert (data_dir / "opsaudit.duckdb").exists()
    assert "notebooks/overview.ipynb" in out


def test_a_relative_data_dir_is_printed_absolute_for_the_notebook(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`demo --data-dir reldemo` printed `OPSAUDIT_DATA_DIR=reldemo OPSAUDIT_NOTEBOOK_OUT=plots
    jupyter execute notebooks/overview.ipynb`: jupyter runs the kernel in notebooks/, so the
    notebook found no data there and its PNGs went to notebooks/plots, not ./plots. Both
    paths are printed absolute."""
    monkeypatch.chdir(tmp_path)
    result = invoke("demo", "--data-dir", "reldemo", "--projects", "1", "--days", "1")
    assert result.exit_code == 0, result.output
    data_dir, plots = shlex.quote(str(tmp_path / "reldemo")), shlex.quote(str(tmp_path / "plots"))
    assert f"The dataset is in {tmp_path / 'reldemo'}." in result.stdout
    assert result.stdout.endswith(
        f"  OPSAUDIT_DATA_DIR={data_dir} OPSAUDIT_NOTEBOOK_OUT={plots} jupyter execute "
        "notebooks/overview.ipynb    # the overview notebook (a clone with '.[test]'): its "
        f"figures as PNG files in {tmp_path / 'plots'}\n"
    )


def test_report_agrees_with_query(demo: tuple[Path, Result]) -> None:
    data_dir, result = demo
    assert result.exit_code == 0, result.output
    report = invoke("report", "--data-dir", str(data_dir), "--format", "json")
    assert report.exit_code == 0, report.output
    data = orjson.loads(report.stdout)
    assert set(data) >= {"failures", "durations", "action_mix"}

    counts = {
        r["action"]: r["n"]
        for r in query(data_dir, "SELECT action, count(*) AS n FROM operations GROUP BY action")
    }
    assert sum(counts.values()) > 1000
    assert {r["action"]: r["operations"] for r in data["action_mix"]} == counts

    failed = {
        r["action"]: r["n"]
        for r in query(
            data_dir,
            "SELECT action, count(*) AS n FROM operations WHERE failures_count > 0 GROUP BY action",
        )
    }
    assert failed, "the demo account has failures"
    report_failed = {r["action"]: r["failed"] for r in data["failures"] if r["failed"]}
    assert report_failed == failed


def test_printed_next_commands_run(demo: tuple[Path, Result]) -> None:
    """Every `opsaudit ...` line the demo prints works as printed."""
    _, result = demo
    next_steps = result.stdout.split("Next, try:\n", 1)[1]
    lines = [
        line.strip().split("    #")[0]
        for line in next_steps.splitlines()
        if line.strip().startswith("opsaudit ")
    ]
    assert [shlex.split(line)[1] for line in lines] == ["query", "query", "report", "status"]
    for line in lines:
        run = invoke(*shlex.split(line)[1:])
        assert run.exit_code == 0, (line, run.output)
        assert run.stdout.strip()


def test_demo_shows_branches_by_name(demo: tuple[Path, Result]) -> None:
    """Issue 21: the printed report says where failures come from by branch name, as the
    dataset counts them (the simulator's listings name every branch it still has)."""
    data_dir, result = demo
    assert result.exit_code == 0, result.output
    top = query(
        data_dir,
        "SELECT o.project_id, o.action, b.name, o.branch_id, count(*) AS operations, "
        "count(*) FILTER (WHERE o.failures_count > 0) AS failed FROM operations AS o "
        "LEFT JOIN branches AS b ON b.id = o.branch_id WHERE o.branch_id IS NOT NULL "
        "GROUP BY ALL HAVING failed > 0 "
        "ORDER BY failed DESC, operations DESC, o.project_id, o.branch_id, o.action LIMIT 3",
    )
    where = [f"`{r['name']}` ({r['branch_id']})" if r["name"] else r["branch_id"] for r in top]
    [line] = [x for x in result.stdout.splitlines() if x.startswith("By branch ")]
    assert line.removeprefix("By branch").strip() == "; ".join(
        f"{r['action']} failed {r['failed']:,} times on {w}" for r, w in zip(top, where)
    )
    assert all(r["name"] for r in top)  # the busiest branches are listed: named
    section = result.stdout.split("Failures per branch (latest name; deleted: no longer listed)\n")
    first_row = section[1].splitlines()[2]
    [busiest] = query(
        data_dir,
        "SELECT branch_name, branch_id FROM failures_by_branch "
        "ORDER BY failed DESC, operations DESC, project_id, branch_id LIMIT 1",
    )
    assert first_row.startswith(f"`{busiest['branch_name']}` ({busiest['branch_id']})  ")


def test_history_ends_when_the_demo_runs(demo: tuple[Path, Result]) -> None:
    """Issue 15: the newest operation is within a minute of the run, so --since 7d shows data."""
    data_dir, result = demo
    assert result.exit_code == 0, result.output
    [row] = query(
        data_dir,
        "SELECT epoch(r.started_at) - epoch(o.newest) AS behind FROM "
        "(SELECT max(created_at) AS newest FROM operations) o, "
        "(SELECT min(started_at) AS started_at FROM sync_runs) r",
    )
    assert 0 <= row["behind"] < 60
    week = invoke("report", "--data-dir", str(data_dir), "--since", "7d", "--format", "json")
    assert week.exit_code == 0, week.output
    [recent] = query(
        data_dir,
        "SELECT count(*) AS n FROM operations WHERE created_at >= now() - INTERVAL 7 DAYS",
    )
    assert orjson.loads(week.stdout)["operations"] == recent["n"] > 1000
    assert "--since 7d" in result.stdout.split("Next, try:\n", 1)[1]


def test_same_seed_same_history_shifted(tmp_path: Path) -> None:
    """A pinned clock: the history ends exactly there, and another clock only shifts it."""
    from exporter.analytics.views import connect
    from exporter.demo import run_demo

    ends = [
        dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.timezone.utc),
        dt.datetime(2026, 7, 9, 8, 30, 15, tzinfo=dt.timezone.utc),
    ]
    histories = []
    for n, end in enumerate(ends):
        result = run_demo(
            tmp_path / str(n), projects=2, days=1, ops_per_project_per_day=100, now=end
        )
        assert result.history_end == end
        con = connect(result.data_dir)
        try:
            rows = con.execute(
                "SELECT id, project_id, action, status, failures_count, total_duration_ms, "
                "epoch_us(created_at) - epoch_us($end) AS created, "
                "epoch_us(updated_at) - epoch_us($end) AS updated FROM operations ORDER BY id",
                {"end": end},
            ).fetchall()
        finally:
            con.close()
        assert rows and max(r[6] for r in rows) <= 0  # nothing after the clock
        histories.append(rows)
    assert histories[0] == histories[1]


def test_demo_default_dir_is_temporary_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # re-read TMPDIR
    result = invoke("demo", "--projects", "1", "--days", "1", "--no-progress")
    assert result.exit_code == 0, result.output
    made = [p for p in tmp_path.iterdir() if p.name.startswith("opsaudit-demo-")]
    assert len(made) == 1
    assert f"The dataset is in {made[0]} (a temporary directory, kept" in result.stdout
    assert (made[0] / "opsaudit.duckdb").exists()


def test_demo_refuses_a_non_empty_dir(tmp_path: Path) -> None:
    (tmp_path / "something").write_text("x")
    result = invoke("demo", "--data-dir", str(tmp_path), "--no-progress")
    assert result.exit_code == 2
    assert "give it a new or empty directory" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["something"]
