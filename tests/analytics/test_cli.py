"""`opsaudit query` and `opsaudit report` through click's CliRunner: exit codes, exact output."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner, Result

from exporter.cli import cli


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)


def test_query_json_is_one_array_with_iso_utc_timestamps(data_dir: Path) -> None:
    result = invoke(
        "query",
        "--data-dir",
        str(data_dir),
        "--format",
        "json",
        "SELECT id, status, created_at, created_date, total_duration_ms, "
        "1.50::DECIMAL(4, 2) AS d FROM operations WHERE id IN ('o3', 'o7') ORDER BY id",
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == (
        "[\n"
        "  {\n"
        '    "id": "o3",\n'
        '    "status": "finished",\n'
        '    "created_at": "2025-01-10T12:00:00Z",\n'
        '    "created_date": "2025-01-10",\n'
        '    "total_duration_ms": 300,\n'
        '    "d": 1.5\n'
        "  },\n"
        "  {\n"
        '    "id": "o7",\n'
        '    "status": "waiting_for_quorum",\n'
        '    "created_at": "2025-01-12T08:00:00Z",\n'
        '    "created_date": "2025-01-12",\n'
        '    "total_duration_ms": null,\n'
        '    "d": 1.5\n'
        "  }\n"
        "]\n"
    )


def test_query_table_and_csv(data_dir: Path, tmp_path: Path) -> None:
    sql = "SELECT action, operations, share FROM action_mix"
    table = invoke("query", "--data-dir", str(data_dir), sql)
    assert table.exit_code == 0
    assert table.stdout == (
        "action           operations  share\n"
        "---------------  ----------  -----\n"
        "start_compute             6  0.500\n"
        "suspend_compute           3  0.250\n"
        "create_branch             2  0.167\n"
        "lfc_autoresize            1  0.083\n"
        "(4 rows)\n"
    )
    out = tmp_path / "mix.csv"
    csv = invoke("query", "--data-dir", str(data_dir), "--format", "csv", "-o", str(out), sql)
    assert (csv.exit_code, csv.stdout) == (0, "")
    assert out.read_text().splitlines()[:2] == ["action,operations,share", "start_compute,6,0.5"]


def test_query_empty_result_keeps_the_columns(data_dir: Path) -> None:
    result = invoke(
        "query", "--data-dir", str(data_dir), "--format", "csv", "FROM operations WHERE false"
    )
    assert result.stdout.startswith("id,project_id,branch_id,endpoint_id,action,status,")
    json = invoke(
        "query", "--data-dir", str(data_dir), "--format", "json", "FROM sync_runs LIMIT 0"
    )
    assert json.stdout == "[]\n"


def test_bad_sql_is_exit_7_with_duckdbs_whole_message_no_traceback(data_dir: Path) -> None:
    result = invoke("query", "--data-dir", str(data_dir), "SELEC 1")
    assert result.exit_code == 7
    assert result.stdout == ""
    assert result.stderr == (
        'Error: Parser Error: syntax error at or near "SELEC"\n\nLINE 1: SELEC 1\n        ^^^^^\n'
    )
    # The hint and the caret line are DuckDB's own: they say what to fix.
    unknown = invoke("query", "--data-dir", str(data_dir), "SELECT * FROM operation")
    assert unknown.exit_code == 7
    assert unknown.stderr == (
        "Error: Catalog Error: Table with name operation does not exist!\n"
        'Did you mean "operations"?\n'
        "\n"
        "LINE 1: SELECT * FROM operation\n"
        "                      ^^^^^^^^^\n"
    )


def test_query_sql_from_a_file_or_stdin(data_dir: Path, tmp_path: Path) -> None:
    sql = "-- kept in a repository\nSELECT count(*) AS n FROM operations;\n"
    (tmp_path / "q.sql").write_text(sql)
    expected = "n\n12\n"
    for args, stdin in (
        (["-f", str(tmp_path / "q.sql")], None),
        (["--file", "-"], sql),
        (["-"], sql),
    ):
        result = CliRunner().invoke(
            cli,
            ["query", "--data-dir", str(data_dir), "--format", "csv", *args],
            input=stdin,
            prog_name="opsaudit",
        )
        assert (result.exit_code, result.stdout, result.stderr) == (0, expected, ""), args
    both = invoke("query", "--data-dir", str(data_dir), "-f", str(tmp_path / "q.sql"), "SELECT 1")
    assert both.exit_code == 2
    assert both.stderr.endswith("Error: give the SQL as an argument or with -f FILE, not both\n")
    neither = invoke("query", "--data-dir", str(data_dir))
    assert neither.exit_code == 2
    assert neither.stderr.endswith(
        'Error: no SQL given: opsaudit query "SELECT ...", -f FILE or - (stdin)\n'
    )


def test_query_sql_not_utf8_is_a_usage_error(data_dir: Path, tmp_path: Path) -> None:
    """Latin-1 SQL said "unexpected error ... This is a bug in opsaudit" (exit 5): a
    UnicodeDecodeError from -f FILE and stdin, a TypeError from DuckDB's parser for the
    argument (undecodable argv bytes arrive as surrogates). A usage error, as a bad TOML file."""
    latin1 = b"select 'caf\xe9' as x"
    (tmp_path / "q.sql").write_bytes(latin1)
    for args, stdin, source in (
        (["-f", str(tmp_path / "q.sql")], None, f"-f {tmp_path / 'q.sql'}"),
        (["--file", "-"], latin1, "stdin"),
        (["-"], latin1, "stdin"),
        ([latin1.decode("utf-8", "surrogateescape")], None, "the SQL argument"),
    ):
        result = CliRunner().invoke(
            cli, ["query", "--data-dir", str(data_dir), *args], input=stdin, prog_name="opsaudit"
        )
        assert result.exit_code == 2, args
        assert result.stderr.endswith(
            f"Error: {source} is not UTF-8 text: save the SQL as UTF-8\n"
        ), args


def test_a_terminal_without_the_ellipsis_gets_a_question_mark(data_dir: Path) -> None:
    """On a Latin-1 terminal the '\u2026' of a cut cell crashed the table (UnicodeEncodeError,
    exit 5, "a bug in opsaudit"): what the terminal's encoding cannot carry is replaced."""
    sql = "SELECT raw FROM operations WHERE id = 'o1'"
    utf8 = invoke("query", "--data-dir", str(data_dir), sql)
    assert "\u2026\n(1 row)" in utf8.stdout
    latin1 = CliRunner(charset="latin-1").invoke(cli, ["query", "--data-dir", str(data_dir), sql])
    assert (latin1.exit_code, latin1.stdout) == (0, utf8.stdout.replace("\u2026", "?"))


def test_query_json_keeps_every_column_of_a_join(data_dir: Path) -> None:
    # A join's `SELECT *` names `id` and `created_at` twice: as keys of one object the project's
    # values replaced the operation's, silently (a new user's first hour, thirteenth review).
    sql = (
        "SELECT o.id, o.created_at, p.id, p.created_at, 1 AS id_1 FROM operations o "
        "JOIN projects p ON p.id = o.project_id WHERE o.id = 'o3'"
    )
    jsonl = invoke("query", "--data-dir", str(data_dir), "--format", "jsonl", sql)
    assert jsonl.exit_code == 0, jsonl.output
    project = orjson.loads(
        invoke(
            "query",
            "--data-dir",
            str(data_dir),
            "--format",
            "json",
            "SELECT id, created_at FROM projects WHERE id = "
            "(SELECT project_id FROM operations WHERE id = 'o3')",
        ).stdout
    )[0]
    assert orjson.loads(jsonl.stdout) == {
        "id": "o3",
        "created_at": "2025-01-10T12:00:00Z",
        "id_2": project["id"],
        "created_at_1": project["created_at"],
        "id_1": 1,
    }
    json = invoke("query", "--data-dir", str(data_dir), "--format", "json", sql)
    assert orjson.loads(json.stdout) == [orjson.loads(jsonl.stdout)]


def test_query_jsonl_and_markdown(data_dir: Path) -> None:
    sql = "SELECT id, created_at, total_duration_ms FROM operations WHERE id IN ('o3', 'o7') ORDER BY id"
    jsonl = invoke("query", "--data-dir", str(data_dir), "--format", "jsonl", sql)
    assert (jsonl.exit_code, jsonl.stdout) == (
        0,
        '{"id":"o3","created_at":"2025-01-10T12:00:00Z","total_duration_ms":300}\n'
        '{"id":"o7","created_at":"2025-01-12T08:00:00Z","total_duration_ms":null}\n',
    )
    none = invoke("query", "--data-dir", str(data_dir), "--format", "jsonl", sql + " LIMIT 0")
    assert (none.exit_code, none.stdout) == (0, "")
    md = invoke("query", "--data-dir", str(data_dir), "--format", "markdown", sql)
    assert (md.exit_code, md.stdout) == (
        0,
        "| id | created_at | total_duration_ms |\n"
        "|---|---|---:|\n"
        "| o3 | 2025-01-10T12:00:00Z | 300 |\n"
        "| o7 | 2025-01-12T08:00:00Z | NULL |\n",
    )


def test_query_empty_statement_is_a_usage_error(data_dir: Path) -> None:
    for sql in ("", "   \n", ";", "-- only a comment\n"):
        result = CliRunner().invoke(
            cli, ["query", "--data-dir", str(data_dir), "-"], input=sql, prog_name="opsaudit"
        )
        assert (result.exit_code, result.stdout, result.stderr) == (
            2,
            "",
            "Error: no SQL statement given (the text is empty or only comments)\n",
        ), sql


def test_query_several_statements_are_refused_not_the_last_shown(data_dir: Path) -> None:
    result = invoke("query", "--data-dir", str(data_dir), "SELECT 1 AS a; SELECT 2 AS b;")
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        "Error: 2 SQL statements given; opsaudit query runs one per call (run each on its own, "
        "or combine them with UNION ALL or WITH)\n",
    )
    one = invoke("query", "--data-dir", str(data_dir), "--format", "csv", "SELECT 1 AS a;")
    assert (one.exit_code, one.stdout) == (0, "a\n1\n")


def test_query_table_caps_rows_and_says_how_many_more(data_dir: Path) -> None:
    sql = "SELECT range AS n FROM range(1, 1206)"
    capped = invoke("query", "--data-dir", str(data_dir), "--max-rows", "3", sql)
    assert (capped.exit_code, capped.stdout) == (
        0,
        "n\n-\n1\n2\n3\n(1,205 rows, 1,202 more rows not shown: --max-rows 0 shows all)\n",
    )
    default = invoke("query", "--data-dir", str(data_dir), sql)
    lines = default.stdout.splitlines()
    assert (len(lines), lines[-2], lines[-1]) == (
        103,
        "100",
        "(1,205 rows, 1,105 more rows not shown: --max-rows 0 shows all)",
    )
    every = invoke("query", "--data-dir", str(data_dir), "--max-rows", "0", sql)
    assert every.stdout.splitlines()[-2:] == ["1205", "(1,205 rows)"]
    csv = invoke("query", "--data-dir", str(data_dir), "--max-rows", "3", "--format", "csv", sql)
    assert len(csv.stdout.splitlines()) == 1206  # the machine formats keep every row


def test_query_named_parameters(data_dir: Path) -> None:
    result = invoke(
        "query",
        "--data-dir",
        str(data_dir),
        "--format",
        "csv",
        "-p",
        "project=p2",
        "--param",
        "since=2025-01-12",
        "SELECT id FROM operations WHERE project_id = $project AND created_at >= $since "
        "ORDER BY id",
    )
    assert (result.exit_code, result.stdout) == (0, "id\no12\no9\n")
    bad = invoke("query", "--data-dir", str(data_dir), "-p", "nope", "SELECT 1")
    assert bad.exit_code == 2
    assert bad.stderr.endswith("Error: Invalid value for '--param': 'nope' is not NAME=VALUE\n")


def test_missing_data_dir_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("query", "--data-dir", str(tmp_path / "typo"), "SELECT 1")
    assert result.exit_code == 2
    assert "does not exist" in result.stderr


def test_report_json(data_dir: Path) -> None:
    result = invoke(
        "report",
        "--data-dir",
        str(data_dir),
        "--format",
        "json",
        "--project",
        "p2",
        "--since",
        "2025-01-11",
        "--until",
        "2025-01-11",
    )
    assert result.exit_code == 0, result.output
    data = orjson.loads(result.stdout)
    # "Stuck" is measured at the time of the run (o5 is open since 2025-01-11).
    as_of = dt.datetime.fromisoformat(data["headline"].pop("as_of").replace("Z", "+00:00"))
    assert abs(dt.datetime.now(dt.timezone.utc) - as_of) < dt.timedelta(minutes=1)

    def age(since: dt.datetime) -> str:  # whole seconds, as ISO 8601 in json
        return f"PT{round((as_of - since).total_seconds())}S"

    assert data == {
        "since": "2025-01-11T00:00:00Z",
        "until": "2025-01-12T00:00:00Z",
        "projects": ["p2"],
        "operations": 3,
        # The fixed dataset's runs: run-1 ok, finished 2025-01-11 10:02; run-2 partial.
        "freshness": {
            "last_success_at": "2025-01-11T10:02:00Z",
            "lag": age(dt.datetime(2025, 1, 11, 10, 2, tzinfo=dt.timezone.utc)),
            "last_run_at": "2025-01-12T13:01:00Z",
            "last_run_outcome": "partial",
            "last_run_projects_ok": None,
            "last_run_projects": None,
        },
        "failing_operations": [
            {"id": "o5", "project_id": "p2", "branch_id": "br-p2", "branch_name": None}
            | {"branch_deleted_at": None, "action": "suspend_compute", "status": "failed"}
            | {
                "error": "pod not ready",
                "age": age(dt.datetime(2025, 1, 11, 10, tzinfo=dt.timezone.utc)),
            }
        ],
        "stuck_operations": [],  # o5 is open and old, but failing: listed once, above
        "errors": [
            {"error": "pod not ready", "operations": 1, "actions": "suspend_compute"}
            | {"last_seen": "2025-01-11T10:00:05Z"}
        ],
        "projects_failures": [
            {"project_id": "p2", "operations": 3, "failed": 1, "failure_rate": 1 / 3}
            | {"retries": 1, "failing_now": 1}
        ],
        # The fixed dataset's one branch per project was never listed: no name.
        "branches_failures": [
            {"branch_name": None, "branch_id": "br-p2", "project_id": "p2", "deleted_at": None}
            | {"operations": 3, "failed": 1, "failure_rate": 1 / 3, "retries": 1}
            | {"failing_now": 1}
        ],
        "branch_failures": [
            {"action": "suspend_compute", "failed": 1, "branch_name": None, "branch_id": "br-p2"}
            | {"project_id": "p2", "deleted_at": None}
        ],
        "headline": {
            "operations": 3,
            "first_created_at": "2025-01-11T09:00:00Z",
            "last_created_at": "2025-01-11T11:00:00Z",
            "failed": 1,
            "failure_rate": 1 / 3,
            "retries": 1,
            "failing_now": 1,
            "stuck": 0,
            "stuck_failing": 1,
            "stuck_after": "PT3600S",
            "most_failures": [{"action": "suspend_compute", "failed": 1}],
            "most_failures_by_branch": [
                {"action": "suspend_compute", "failed": 1, "branch_name": None}
                | {"branch_id": "br-p2", "project_id": "p2", "deleted_at": None}
            ],
            "slowest_p90": {"action": "start_compute", "p90_ms": 200.0, "n": 1},
        },
        "failures": [
            {"action": "suspend_compute", "operations": 1, "failed": 1, "failure_rate": 1.0}
            | {"retries": 1, "failing_now": 1},
            {"action": "create_branch", "operations": 1, "failed": 0, "failure_rate": 0.0}
            | {"retries": 0, "failing_now": 0},
            {"action": "start_compute", "operations": 1, "failed": 0, "failure_rate": 0.0}
            | {"retries": 0, "failing_now": 0},
        ],
        "durations": [
            {"action": "create_branch", "operations": 1, "p50_ms": 20.0, "p90_ms": 20.0}
            | {"p99_ms": 20.0, "max_ms": 20, "wall_p50_ms": 0.0, "wall_p90_ms": 0.0}
            | {"wall_p99_ms": 0.0, "wall_max_ms": 0},
            {"action": "start_compute", "operations": 1, "p50_ms": 200.0, "p90_ms": 200.0}
            | {"p99_ms": 200.0, "max_ms": 200, "wall_p50_ms": 3000.0, "wall_p90_ms": 3000.0}
            | {"wall_p99_ms": 3000.0, "wall_max_ms": 3000},
        ],
        "action_mix": [
            {"action": "create_branch", "operations": 1, "share": 1 / 3},
            {"action": "start_compute", "operations": 1, "share": 1 / 3},
            {"action": "suspend_compute", "operations": 1, "share": 1 / 3},
        ],
    }


def test_report_table(data_dir: Path) -> None:
    result = invoke(
        "report", "--data-dir", str(data_dir), "--project", "p1", "--until", "2025-01-10"
    )
    assert result.exit_code == 0, result.output
    head, blank, data, rest = result.stdout.split("\n", 3)
    # The lag is measured at the time of the run.
    assert data.startswith("Data           last successful sync 2025-01-11T10:02:00Z, ")
    assert data.endswith(" before this report; last run 2025-01-12T13:01:00Z: partial")
    assert head + "\n" + blank + "\n" + rest == (
        "opsaudit report: 3 operations (until 2025-01-11T00:00:00Z; project p1)\n"
        "\n"
        "Operations     3, created 2025-01-10T10:00:00Z to 2025-01-10T12:00:00Z\n"
        "Failure rate   33.3 % (1 failed at least once; 2 retries) (n=3)\n"
        "Failing now    0 (latest status failed or error)\n"
        "Stuck          0 still running or waiting, not terminal 1 hour after creation\n"
        "Most failures  start_compute 1\n"
        "By branch      start_compute failed once on br-p1\n"
        "Slowest (p90)  start_compute 280 ms (n=2)\n"
        "\n"
        "Failing now (latest status failed or error), oldest first\n"
        "id  project_id  branch  action  status  error  age\n"
        "--  ----------  ------  ------  ------  -----  ---\n"
        "(0 rows)\n"
        "\n"
        "Stuck: still running or waiting 1 hour after creation, oldest first\n"
        "id  project_id  branch  action  status  error  age\n"
        "--  ----------  ------  ------  ------  -----  ---\n"
        "(0 rows)\n"
        "\n"
        "Top error texts (operations that reported each)\n"
        "error                         operations  actions        last_seen\n"
        "----------------------------  ----------  -------------  --------------------\n"
        "pageserver request timed out           1  start_compute  2025-01-10T12:00:05Z\n"
        "(1 row)\n"
        "\n"
        "Failures per project\n"
        "project_id  operations  failed  failure_rate_%  retries  failing_now\n"
        "----------  ----------  ------  --------------  -------  -----------\n"
        "p1                   3       1            33.3        2            0\n"
        "(1 row)\n"
        "\n"
        "Failures per branch (latest name; deleted: no longer listed)\n"
        "branch  project_id  operations  failed  failure_rate_%  retries  failing_now\n"
        "------  ----------  ----------  ------  --------------  -------  -----------\n"
        "br-p1   p1                   3       1            33.3        2            0\n"
        "(1 row)\n"
        "\n"
        "Failures per action (failed = failed at least once; failing_now = status failed or error)\n"
        "action           operations  failed  failure_rate_%  retries  failing_now\n"
        "---------------  ----------  ------  --------------  -------  -----------\n"
        "start_compute             2       1              50        2            0\n"
        "suspend_compute           1       0               0        0            0\n"
        "(2 rows)\n"
        "\n"
        "Durations of terminal operations in ms (total_duration_ms; wall = updated_at - created_at)\n"
        "action           operations  p50_ms  p90_ms  p99_ms  max_ms  wall_p50_ms  wall_p90_ms  wall_p99_ms  wall_max_ms\n"
        "---------------  ----------  ------  ------  ------  ------  -----------  -----------  -----------  -----------\n"
        "start_compute             2     200     280     298     300        5,500        9,100        9,910       10,000\n"
        "suspend_compute           1      50      50      50      50        2,000        2,000        2,000        2,000\n"
        "(2 rows)\n"
        "\n"
        "Action mix\n"
        "action           operations  share_%\n"
        "---------------  ----------  -------\n"
        "start_compute             2     66.7\n"
        "suspend_compute           1     33.3\n"
        "(2 rows)\n"
    )


def test_report_csv_and_markdown(data_dir: Path) -> None:
    csv = invoke("report", "--data-dir", str(data_dir), "--format", "csv", "--project", "p2")
    assert csv.exit_code == 0
    lines = csv.stdout.splitlines()
    assert lines[0] == (
        "section,id,project_id,branch_id,branch_name,branch_deleted_at,action,status,error,age,"
        "operations,actions,last_seen,failed,failure_rate,retries,failing_now,deleted_at,p50_ms,p90_ms,p99_ms,max_ms,wall_p50_ms,wall_p90_ms,"
        "wall_p99_ms,wall_max_ms,share,last_success_at,lag,last_run_at,last_run_outcome,"
        "last_run_projects_ok,last_run_projects"
    )
    assert [line.split(",")[0] for line in lines[1:]] == (
        ["freshness"]
        + ["failing"] * 1
        + ["stuck"]
        + ["errors"]
        + ["projects"]
        + ["branches"]
        + ["failures"] * 3
        + ["durations"] * 2
        + ["action_mix"] * 3
    )
    assert "failures,,,,,,suspend_compute,,,,1,,,1,1.0,1,1,,,,,,,,,,,,,,,," in lines
    assert "branches,,p2,br-p2,,,,,,,5,,,1,0.2,1,1,,,,,,,,,,,,,,,," in lines
    assert [line.split(",")[0] for line in lines[1:]].count("action_mix") == 3
    md = invoke("report", "--data-dir", str(data_dir), "--format", "markdown")
    assert md.exit_code == 0
    assert md.stdout.startswith("# opsaudit report: 12 operations (all time, all projects)\n")
    assert "## Action mix\n\n| action | operations | share_% |\n|---|---:|---:|\n" in md.stdout
    assert "| lfc_autoresize | 1 | 8.3 |" in md.stdout


def test_report_empty_dataset_says_so(tmp_path: Path) -> None:
    table = invoke("report", "--data-dir", str(tmp_path))
    assert table.exit_code == 0
    assert table.stdout == (
        "opsaudit report: 0 operations (all time, all projects)\n"
        "\n"
        "Data  no successful sync yet\n"
        "\n"
        "No operations in the dataset yet: run `opsaudit sync` first.\n"
    )
    json = invoke("report", "--data-dir", str(tmp_path), "--format", "json")
    assert json.exit_code == 0
    data = orjson.loads(json.stdout)
    assert (data["operations"], data["failures"], data["durations"], data["action_mix"]) == (
        0,
        [],
        [],
        [],
    )
    assert json.stderr == "No operations in the dataset yet: run `opsaudit sync` first.\n"


def test_report_window_with_no_match_still_says_how_fresh(data_dir: Path, tmp_path: Path) -> None:
    """An empty window printed the title and "No operations match" alone in table, markdown and
    html (json and csv kept the freshness): with cron broken for days, `report --since 1d` said
    nothing of the last sync. Every format says it, in the headline's words."""
    fresh = "last successful sync 2025-01-11T10:02:00Z, "
    last_run = " before this report; last run 2025-01-12T13:01:00Z: partial"
    table = invoke("report", "--data-dir", str(data_dir), "--since", "2030-01-01")
    assert table.exit_code == 0
    head, blank, data, rest = table.stdout.split("\n", 3)
    assert (head, blank) == ("opsaudit report: 0 operations (since 2030-01-01T00:00:00Z)", "")
    assert data.startswith(f"Data  {fresh}") and data.endswith(last_run)
    assert rest == "\nNo operations match (since 2030-01-01T00:00:00Z).\n"
    md = invoke(
        "report", "--data-dir", str(data_dir), "--since", "2030-01-01", "--format", "markdown"
    )
    head, blank, data, rest = md.stdout.split("\n", 3)
    assert (head, blank) == ("# opsaudit report: 0 operations (since 2030-01-01T00:00:00Z)", "")
    assert data.startswith(f"- **Data**: {fresh}") and data.endswith(last_run)
    assert rest == "\nNo operations match (since 2030-01-01T00:00:00Z).\n"
    out = tmp_path / "r.html"
    page = invoke(
        "report",
        "--data-dir",
        str(data_dir),
        "--since",
        "2030-01-01",
        "--format",
        "html",
        "-o",
        str(out),
    )
    assert page.exit_code == 0
    text = out.read_text()
    assert f'<table class="headline"><tbody><tr><th>Data</th><td>{fresh}' in text
    assert "<p>No operations match (since 2030-01-01T00:00:00Z).</p>" in text


def test_report_bad_since_is_a_usage_error(data_dir: Path) -> None:
    result = invoke("report", "--data-dir", str(data_dir), "--since", "last week")
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: 'last week' is not a time: use a duration")


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--until", "9999-12-31", "'9999-12-31' is past the year 9998: leave the bound out"),
        ("--since", "9999-12-31", "'9999-12-31' is past the year 9998: leave the bound out"),
        ("--since", "9999-01-01T00:00:00Z", "'9999-01-01T00:00:00Z' is past the year 9998"),
        ("--since", "99999999d", "'99999999d' is further back than any date"),
        ("--since", "9999999999d", "'9999999999d' is longer than any duration can be"),
    ],
)
def test_report_bounds_out_of_any_calendar_are_usage_errors(
    data_dir: Path, option: str, value: str, message: str
) -> None:
    """Not an unexpected error (exit 5, "a bug in opsaudit") as before."""
    result = invoke("report", "--data-dir", str(data_dir), option, value)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.startswith(f"Error: {message}")


@pytest.mark.parametrize("value", ["2025-01-11T05:30:00+53:00", "2025-01-11T05:30:00-0575"])
def test_report_offset_out_of_range_is_a_usage_error(data_dir: Path, value: str) -> None:
    """An offset past 23 hours or 59 minutes (a typo of +05:30) moved the bound by days: the
    report ran on another window than the one asked for, exit 0."""
    result = invoke("report", "--data-dir", str(data_dir), "--since", value)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith(
        f"Error: {value!r} has no such UTC offset: hours 00-23, minutes 00-59 (+05:30)\n"
    )
    fine = invoke("report", "--data-dir", str(data_dir), "--since", "2025-01-11T09:30:00+05:30")
    assert fine.stdout.startswith("opsaudit report: 9 operations (since 2025-01-11T04:00:00Z")


def test_a_typo_that_is_no_time_is_not_called_an_offset(data_dir: Path) -> None:
    """Four digits after a sign ended any text: `--since 2025-01-3199` (a date mistyped) was
    told of UTC offsets, which it has none of; it is no time, as it was before."""
    report = invoke("report", "--data-dir", str(data_dir), "--since", "2025-01-3199")
    assert (report.exit_code, report.stdout) == (2, "")
    assert report.stderr.endswith(
        "Error: '2025-01-3199' is not a time: use a duration back from now (7d, 24h, 30m, 2w), "
        "a date (2025-01-31) or an RFC 3339 time (2025-01-31T12:00:00Z)\n"
    )
    check = invoke("check", "--data-dir", str(data_dir), "--as-of", "12:00+9999")
    assert (check.exit_code, check.stdout) == (2, "")
    assert check.stderr.endswith(
        "Error: Invalid value for '--as-of': '12:00+9999' is not an RFC 3339 time "
        "(2025-01-31T12:00:00Z)\n"
    )


def test_a_duration_longer_than_any_is_a_usage_error(data_dir: Path) -> None:
    result = invoke("check", "--data-dir", str(data_dir), "--max-age", "9999999999d")
    assert (result.exit_code, result.stdout) == (2, "")
    assert "'9999999999d' is longer than any duration can be" in result.stderr


def test_report_inverted_range_is_a_usage_error(data_dir: Path) -> None:
    result = invoke(
        "report", "--data-dir", str(data_dir), "--since", "2025-01-12", "--until", "2025-01-11"
    )
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith(
        "Error: --since 2025-01-12 is not before --until 2025-01-11: nothing can match (a "
        "--until date includes that day)\n"
    )
    # The same date twice is that one day.
    one_day = invoke(
        "report", "--data-dir", str(data_dir), "--since", "2025-01-11", "--until", "2025-01-11"
    )
    assert one_day.stdout.startswith("opsaudit report: 3 operations (since 2025-01-11T00:00:00Z;")


@pytest.mark.parametrize(("since", "until"), [("7d", "7d"), ("24h", "1d"), ("60m", "3600s")])
def test_report_same_duration_twice_is_an_empty_range(
    data_dir: Path, since: str, until: str
) -> None:
    """Each bound took its own "now": `--since 7d --until 7d` ran a report of the microseconds
    between the two (exit 0, "0 operations"), where an inverted range is a usage error."""
    result = invoke("report", "--data-dir", str(data_dir), "--since", since, "--until", until)
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr.endswith(
        f"Error: --since {since} is not before --until {until}: nothing can match (a --until "
        "date includes that day)\n"
    )


def test_report_warns_about_an_unknown_project(data_dir: Path) -> None:
    result = invoke("report", "--data-dir", str(data_dir), "--project", "p9", "--project", "p1")
    assert result.exit_code == 0
    assert result.stderr == "Warning: --project p9 is not in the dataset.\n"
    assert result.stdout.startswith("opsaudit report: 7 operations (project p9, p1)\n")


HTML = ("--format", "html")


def test_report_html_to_a_terminal_writes_report_html(data_dir: Path, tmp_path: Path) -> None:
    """Five megabytes of HTML are not printed on a terminal: report.html, and its path."""
    import os
    import pty
    import subprocess
    import sys

    primary, secondary = pty.openpty()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "exporter", "report", "--data-dir", str(data_dir), *HTML],
            stdout=secondary,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            timeout=120,
            check=False,
        )
        os.close(secondary)
        secondary = -1
        out = b""
        while True:
            try:
                chunk = os.read(primary, 4096)
            except OSError:  # the terminal closed: all read
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(primary)
        if secondary != -1:
            os.close(secondary)
    assert proc.returncode == 0, proc.stderr
    page = tmp_path / "report.html"
    assert out.decode() == f"Wrote {page} (open it in a browser).\r\n"
    assert page.read_text().startswith("<!DOCTYPE html>")


def test_report_csv_section_is_one_table_with_its_own_columns(data_dir: Path) -> None:
    result = invoke(
        "report", "--data-dir", str(data_dir), "--format", "csv", "--section", "projects"
    )
    assert (result.exit_code, result.stdout) == (
        0,
        "project_id,operations,failed,failure_rate,retries,failing_now\n"
        "p1,7,2,0.2857142857142857,3,1\n"
        "p2,5,1,0.2,1,1\n",
    )
    errors = invoke("report", "--data-dir", str(data_dir), "--format", "csv", "--section", "errors")
    fresh = invoke(
        "report", "--data-dir", str(data_dir), "--format", "csv", "--section", "freshness"
    )
    assert fresh.exit_code == 0, fresh.output
    header, row = fresh.stdout.splitlines()  # the lag runs to now
    assert header == (
        "last_success_at,lag,last_run_at,last_run_outcome,last_run_projects_ok,last_run_projects"
    )
    assert row.startswith("2025-01-11T10:02:00Z,PT")
    assert row.endswith("S,2025-01-12T13:01:00Z,partial,,")
    assert errors.stdout.splitlines()[0] == "error,operations,actions,last_seen"
    assert len(errors.stdout.splitlines()) == 4
    wrong = invoke("report", "--data-dir", str(data_dir), "--section", "errors")
    assert wrong.exit_code == 2
    assert wrong.stderr.endswith("Error: --section goes with --format csv\n")


@pytest.mark.parametrize(
    "command",
    [
        ("report", "--format", "html"),
        ("query", "--format", "csv", "SELECT range AS n FROM range(200000)"),
    ],
    ids=["report", "query"],
)
def test_an_output_file_whose_write_fails_keeps_its_previous_content(
    data_dir: Path, tmp_path: Path, command: tuple[str, ...]
) -> None:
    """`-o FILE` was written in place: a write that failed part way (a full disk, here a file
    size limit: EFBIG past 4 KiB) left a cut file where the previous report was. It is
    written aside and renamed over the old one: that stays byte for byte, no temporary is left,
    and the failure is a one-line error, exit 2."""
    import os
    import resource
    import signal
    import subprocess
    import sys

    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out = out_dir / "report.out"
    previous = b"the previous report\n" * 10
    out.write_bytes(previous)

    def small_files() -> None:  # in the child: writes past 4 KiB fail (EFBIG), no signal
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    root = Path(__file__).resolve().parents[2]
    args = [command[0], "--data-dir", str(data_dir), "-o", str(out), *command[1:]]
    env = {**os.environ, "PYTHONPATH": str(root), "PYTHONDONTWRITEBYTECODE": "1"}
    failed = subprocess.run(
        [sys.executable, "-m", "exporter", *args],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=small_files,
    )
    assert (failed.returncode, failed.stdout, failed.stderr) == (
        2,
        "",
        f"Error: cannot write -o {out}: File too large\n",
    )
    assert out.read_bytes() == previous
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.out"]
    # Without the limit, the new content replaces the old, and keeps its mode.
    out.chmod(0o640)
    written = subprocess.run(
        [sys.executable, "-m", "exporter", *args], env=env, capture_output=True, text=True
    )
    assert (written.returncode, written.stdout) == (0, ""), written.stderr
    assert out.stat().st_size > 4096 and (out.stat().st_mode & 0o777) == 0o640
    assert sorted(p.name for p in out_dir.iterdir()) == ["report.out"]
