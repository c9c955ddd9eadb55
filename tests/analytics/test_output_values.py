"""What `opsaudit query` and `opsaudit report` print of odd values synced from the simulator:
escape characters and wide (CJK) characters in branch names and error texts."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from exporter.cli import cli

ESC_BRANCH = "fix/\x1b[31mred\x1b[0m"
ESC_ERROR = "boom \x1b[2J\x1b[1mcleared"
WIDE_BRANCH = "機能/ログイン"


@pytest.fixture(scope="module")
def odd_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One synced project whose branches and one error carry escapes and wide characters."""
    from exporter.api.client import RetryPolicy
    from exporter.engine.sync import SyncConfig, sync
    from exporter.simulator import SimConfig, Simulator

    data_dir = tmp_path_factory.mktemp("odd") / "data"
    config = SimConfig(seed=11, projects=1, shared_projects=0, orgs=1, days=1)
    with Simulator(config) as sim:
        project = sim.project_ids()[0]
        for name, error in ((ESC_BRANCH, ESC_ERROR), (WIDE_BRANCH, None), ("plain", None)):
            _, _, ops = sim.add_branch(project, name=name)
            if error is not None:
                sim.update_operation(ops[0], status="failed", error=error)
        summary = sync(
            SyncConfig(
                data_dir=data_dir,
                api_key=sim.personal_key,
                base_url=sim.base_url,
                max_rps=None,
                retry=RetryPolicy(max_attempts=2, backoff_initial=0.01, backoff_max=0.02),
            )
        )
        assert summary.outcome == "ok", summary
    yield data_dir


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)


def test_escapes_reach_a_pipe_as_they_are_stored(odd_dir: Path, tmp_path: Path) -> None:
    """click's echo dropped every "\\x1b[...m" of the data from text sent to a pipe or a file
    (`opsaudit query --format csv ... > rows.csv`): the CSV said `fix/red`, and `-o rows.csv`
    said `fix/\\x1b[31mred\\x1b[0m`."""
    sql = (
        "SELECT branch_name, error FROM operations "
        f"WHERE branch_name = '{ESC_BRANCH}' AND error IS NOT NULL"
    )
    out = tmp_path / "rows.csv"
    piped = invoke("query", "--data-dir", str(odd_dir), "--format", "csv", sql)
    saved = invoke("query", "--data-dir", str(odd_dir), "--format", "csv", "-o", str(out), sql)
    assert (piped.exit_code, saved.exit_code) == (0, 0), piped.output
    assert piped.stdout == f"branch_name,error\n{ESC_BRANCH},{ESC_ERROR}\n"
    assert out.read_text(encoding="utf-8") == piped.stdout
    since = ("--since", "2025-01-16T21:00:00Z")  # the clock: the added branches' operations
    args = ("--data-dir", str(odd_dir), "--format", "csv", "--section", "errors", *since)
    report = invoke("report", *args)
    assert report.exit_code == 0, report.output
    assert report.stdout == (
        f"error,operations,actions,last_seen\n{ESC_ERROR},1,create_branch,2025-01-16T21:00:00Z\n"
    )


def test_a_table_lines_up_wide_characters(odd_dir: Path) -> None:
    """A column was as wide as its longest value in characters: a name in Japanese takes two
    terminal columns a character, and pushed every column right of it out of line."""
    sql = (
        "SELECT name, length(name) AS chars, project_id IS NOT NULL AS listed FROM branches "
        f"WHERE name IN ('{WIDE_BRANCH}', 'plain') ORDER BY name"
    )
    result = invoke("query", "--data-dir", str(odd_dir), sql)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "name           chars  listed\n"
        "-------------  -----  ------\n"
        "plain              5  true\n"
        f"{WIDE_BRANCH}      7  true\n"
        "(2 rows)\n"
    )


def test_a_table_shows_control_characters_escaped(odd_dir: Path) -> None:
    """The table format wrote an error text's ESC and BEL to the terminal as they are: a text
    from the API could clear the screen, ring the bell or colour what followed. Shown as
    Python writes them; csv keeps them as stored (above)."""
    sql = (
        "SELECT branch_name, error || chr(7) || chr(8238) AS error FROM operations "
        f"WHERE branch_name = '{ESC_BRANCH}' AND error IS NOT NULL"
    )
    for fmt, expected in (
        (
            "table",
            "branch_name             error\n"
            "----------------------  ------------------------------------\n"
            "fix/\\x1b[31mred\\x1b[0m  boom \\x1b[2J\\x1b[1mcleared\\x07\\u202e\n"
            "(1 row)\n",
        ),
        (
            "markdown",
            "| branch_name | error |\n"
            "|---|---|\n"
            "| fix/\\x1b[31mred\\x1b[0m | boom \\x1b[2J\\x1b[1mcleared\\x07\\u202e |\n",
        ),
    ):
        result = invoke("query", "--data-dir", str(odd_dir), "--format", fmt, sql)
        assert (result.exit_code, result.stdout) == (0, expected), result.output


def test_a_heading_from_the_data_shows_control_characters_escaped(odd_dir: Path) -> None:
    """A PIVOT makes the data's values the column names: an error text's ESC in a heading
    reached the terminal as it is (the values under it were shown escaped)."""
    sql = "PIVOT (SELECT error FROM operations WHERE error LIKE 'boom%') ON error USING count(*)"
    for fmt, expected in (
        (
            "table",
            f"boom \\x1b[2J\\x1b[1mcleared\n{'-' * 26}\n{' ' * 25}1\n(1 row)\n",
        ),
        ("markdown", "| boom \\x1b[2J\\x1b[1mcleared |\n|---:|\n| 1 |\n"),
    ):
        result = invoke("query", "--data-dir", str(odd_dir), "--format", fmt, sql)
        assert (result.exit_code, result.stdout) == (0, expected), result.output


def test_a_table_gives_marks_that_take_no_column_none(odd_dir: Path) -> None:
    """Only marks with a combining class were counted as no column: Thai and Devanagari vowel
    marks (class 0), a zero-width space or joiner took one each, and pushed the columns right
    of a name in Thai or Hindi out of line by as many."""
    sql = (
        "SELECT name, length(name) AS chars FROM (VALUES ('ไทย์'), ('हिंदी'), "
        "('a\u200bb'), ('plain')) t(name) ORDER BY name"
    )
    result = invoke("query", "--data-dir", str(odd_dir), sql)
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "name   chars\n"
        "-----  -----\n"
        "a\u200bb         3\n"
        "plain      5\n"
        "हिंदी       5\n"
        "ไทย์        4\n"
        "(4 rows)\n"
    )


def test_checks_findings_show_control_characters_escaped() -> None:
    """`check` printed a finding as its text was: a branch's name or a project's error from
    the API, with an ESC, coloured or cleared the terminal. Its lines show them escaped, as the
    tables do; --format json (as_dict) keeps the text as it is."""
    from exporter.ops.check import CheckReport, Finding

    finding = Finding("project_error", "p-1", f"project p-1: {ESC_ERROR}")
    report = CheckReport(as_of=dt.datetime(2025, 1, 17, tzinfo=dt.timezone.utc))
    report.findings.append(finding)
    assert report.lines() == ["project_error: project p-1: boom \\x1b[2J\\x1b[1mcleared"]
    assert finding.as_dict()["message"] == f"project p-1: {ESC_ERROR}"
