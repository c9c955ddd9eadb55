"""`opsaudit query` only reads: statements classified by DuckDB's parser, file access locked.

Issue 15: a `COPY ... TO` into the dataset used to break every later query. Refused statements
exit 2 before anything runs; the connection can read the dataset's files and nothing else.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from exporter.analytics.views import check_read_only, connect
from exporter.cli import cli
from exporter.core.errors import ConfigError, QueryError, ReadOnlyError

from .conftest import write_dataset

HINT = (
    'to save rows use `opsaudit query --format csv -o FILE "SELECT ..."`; for anything else '
    "open <data-dir>/opsaudit.duckdb with the DuckDB CLI"
)


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args), prog_name="opsaudit", catch_exceptions=False)


def refusal(label: str) -> str:
    return f"Error: opsaudit query only reads: {label} statements are refused; {HINT}\n"


@pytest.fixture
def fresh(tmp_path: Path) -> Path:
    """A private copy of the fixed dataset: these tests try to write into it."""
    return write_dataset(tmp_path / "data")


def files_under(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


# (statement, the label the refusal names). {d} is the data directory.
REFUSED = [
    (
        "COPY (SELECT 1 AS x) TO '{d}/operation_versions/created_month=2025-01/zz.parquet' "
        "(FORMAT parquet)",
        "COPY",
    ),
    ("COPY (SELECT 1 AS x) TO '{d}/out.csv'", "COPY"),
    ("COPY operations FROM '{d}/x.csv'", "COPY"),
    ("CREATE TABLE t AS SELECT 1 AS x", "CREATE"),
    ("CREATE VIEW v AS SELECT 1 AS x", "CREATE"),
    ("CREATE TABLE t AS PIVOT (SELECT 'a' AS k) ON k", "MULTI (CREATE)"),
    ("INSERT INTO operations SELECT * FROM operations", "INSERT"),
    ("UPDATE operations SET status = 'x'", "UPDATE"),
    ("DELETE FROM operations", "DELETE"),
    ("DROP VIEW operations", "DROP"),
    ("ALTER VIEW operations RENAME TO o", "ALTER"),
    ("ATTACH '{d}/x.db' AS x", "ATTACH"),
    ("DETACH memory", "DETACH"),
    ("INSTALL httpfs", "LOAD (INSTALL)"),
    ("LOAD httpfs", "LOAD"),
    ("SET enable_external_access = true", "SET"),
    ("RESET lock_configuration", "SET (RESET)"),
    ("USE memory", "SET (USE)"),
    ("PRAGMA threads = 1", "SET (PRAGMA)"),
    ("PRAGMA enable_profiling", "PRAGMA"),
    ("IMPORT DATABASE '{d}'", "PRAGMA (IMPORT)"),
    ("EXPORT DATABASE '{d}/export'", "EXPORT"),
    ("CALL checkpoint()", "CALL"),
    ("CHECKPOINT", "CALL (CHECKPOINT)"),
    ("EXPLAIN ANALYZE COPY (SELECT 1 AS x) TO '{d}/explained.csv'", "COPY"),
    ("EXPLAIN ANALYSE COPY (SELECT 1 AS x) TO '{d}/explained.csv'", "COPY"),
    ("EXPLAIN (FORMAT json) COPY (SELECT 1 AS x) TO '{d}/explained.csv'", "COPY"),
    ("SELECT 1; COPY (SELECT 1 AS x) TO '{d}/second.csv'", "COPY"),
    ("BEGIN TRANSACTION", "TRANSACTION (BEGIN)"),
    ("PREPARE p AS SELECT 1", "PREPARE"),
    ("VACUUM", "VACUUM"),
    ("UPDATE EXTENSIONS", "UPDATE EXTENSIONS"),
]


@pytest.mark.parametrize(("sql", "label"), REFUSED, ids=[label for _, label in REFUSED])
def test_writing_statement_is_refused_before_it_runs(fresh: Path, sql: str, label: str) -> None:
    before = files_under(fresh)
    result = invoke("query", "--data-dir", str(fresh), sql.format(d=fresh))
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", refusal(label))
    assert files_under(fresh) == before
    # The dataset still answers (the COPY of issue 15 used to break every later query).
    after = invoke("query", "--data-dir", str(fresh), "--format", "csv", "FROM action_mix")
    assert (after.exit_code, after.stdout.splitlines()[1]) == (0, "start_compute,6,0.5")


ALLOWED = [
    ("SELECT count(*) AS n FROM operations", "n\n12\n"),
    ("WITH x AS (SELECT 2 AS n) SELECT n FROM x", "n\n2\n"),
    ("VALUES (3)", "col0\n3\n"),
    ("FROM projects SELECT id ORDER BY id", "id\np1\np2\n"),
    ("/* a comment first */ SELECT 5 AS c -- and last\n", "c\n5\n"),
    ("PIVOT (SELECT status FROM operations WHERE id = 'o1') ON status", "finished\n1\n"),
    (
        "PIVOT (SELECT status FROM operations WHERE id = 'o1') ON status IN ('finished')",
        "finished\n1\n",
    ),
]


@pytest.mark.parametrize(("sql", "csv"), ALLOWED)
def test_reading_statement_runs(data_dir: Path, sql: str, csv: str) -> None:
    result = invoke("query", "--data-dir", str(data_dir), "--format", "csv", sql)
    assert (result.exit_code, result.stdout, result.stderr) == (0, csv, "")


@pytest.mark.parametrize(
    ("sql", "first_line"),
    [
        ("DESCRIBE sync_runs", "column_name,column_type,null,key,default,extra"),
        ("SHOW sync_runs", "column_name,column_type,null,key,default,extra"),
        ("SHOW TABLES", "name"),
        ("SUMMARIZE SELECT failures_count FROM operations", "column_name,column_type,min,max,"),
        ("EXPLAIN SELECT * FROM operations", "explain_key,explain_value"),
        ("EXPLAIN ANALYZE SELECT count(*) FROM operations", "explain_key,explain_value"),
        ("EXPLAIN ANALYSE SELECT count(*) FROM operations", "explain_key,explain_value"),
        ("EXPLAIN (FORMAT json) SELECT 1", "explain_key,explain_value"),
        ("PRAGMA table_info('projects')", "cid,name,type,notnull,dflt_value,pk"),
        ("PRAGMA show_tables", "name"),
        ("PRAGMA version", "library_version,source_id,codename"),
        ("CALL pragma_table_info('projects')", "cid,name,type,notnull,dflt_value,pk"),
    ],
)
def test_introspection_runs(data_dir: Path, sql: str, first_line: str) -> None:
    result = invoke("query", "--data-dir", str(data_dir), "--format", "csv", sql)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[0].startswith(first_line)


def _no_access(path: str) -> str:
    """The message for `SELECT * FROM read_csv('<path>')` outside the dataset, up to DuckDB's
    LINE 1 and caret lines (a long path is cut there with "...")."""
    return (
        f'Error: Permission Error: Cannot access file "{path}" - file system operations '
        "are disabled by configuration\n\nLINE 1: SELECT * FROM read_csv('"
    )


def test_file_outside_the_dataset_cannot_be_read(data_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("a\n1\n")
    for path in ("/etc/passwd", outside.as_posix(), f"{data_dir}/../outside.csv"):
        result = invoke("query", "--data-dir", str(data_dir), f"SELECT * FROM read_csv('{path}')")
        assert (result.exit_code, result.stdout) == (7, "")
        assert result.stderr.startswith(_no_access(path))


def test_files_of_the_dataset_can_be_read(data_dir: Path) -> None:
    sql = (
        f"SELECT count(*) AS n FROM read_parquet('{data_dir.resolve()}/operation_versions/*/*"
        ".parquet')"
    )
    result = invoke("query", "--data-dir", str(data_dir), "--format", "csv", sql)
    assert (result.exit_code, result.stdout) == (0, "n\n15\n")


def test_safe_connection_cannot_be_unlocked(data_dir: Path) -> None:
    con = connect(data_dir, safe=True)
    try:
        assert con.execute("SELECT count(*) FROM operations").fetchall() == [(12,)]
        with pytest.raises(duckdb.InvalidInputException, match="configuration has been locked"):
            con.execute("SET enable_external_access = true")
        with pytest.raises(duckdb.PermissionException, match="/etc/passwd"):
            con.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.PermissionException):
            con.execute("INSTALL httpfs")
    finally:
        con.close()


def test_library_classifies_without_running() -> None:
    check_read_only("SELECT 1; EXPLAIN ANALYZE SELECT 2; PRAGMA table_info('operations')")
    with pytest.raises(ReadOnlyError) as refused:
        check_read_only("SELECT 1; DROP VIEW operations")
    assert refused.value.exit_code == 2
    with pytest.raises(QueryError) as malformed:
        check_read_only("SELEC 1")
    assert (type(malformed.value), malformed.value.exit_code) == (QueryError, 7)
    with pytest.raises(ConfigError, match="no SQL statement given") as empty:
        check_read_only("  -- nothing\n")
    assert empty.value.exit_code == 2
    with pytest.raises(ConfigError, match="2 SQL statements given"):
        check_read_only("SELECT 1; SELECT 2", single=True)


def test_report_runs_on_the_locked_connection(data_dir: Path) -> None:
    result = invoke("report", "--data-dir", str(data_dir), "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert next(x for x in lines if x.startswith("failures,")).startswith(
        "failures,,,,,,start_compute,,,,6,,,2,"
    )


def test_duckdb_temporary_directory_is_not_readable(
    data_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 19: DuckDB allowed its temporary directory ($PWD/.tmp) besides the dataset, so a
    query read whatever was there, from any working directory."""
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "x.csv").write_text("secret\nfound\n")
    monkeypatch.chdir(tmp_path)
    for path in (".tmp/x.csv", f"{tmp_path}/.tmp/x.csv"):
        result = invoke("query", "--data-dir", str(data_dir), f"SELECT * FROM read_csv('{path}')")
        assert (result.exit_code, result.stdout) == (7, "")
        assert result.stderr.startswith(_no_access(path))


def test_linked_folders_and_files_of_the_dataset_are_read(fresh: Path, tmp_path: Path) -> None:
    """Issue 19: operation_versions/ moved to another disk and linked back (likewise a partition
    folder or a file) made every query and report exit 7; links elsewhere allow nothing."""
    disk = tmp_path / "other-disk"
    disk.mkdir()
    versions = fresh / "operation_versions"
    (versions / "created_month=2025-01").rename(disk / "month")
    (versions / "created_month=2025-01").symlink_to(disk / "month")
    versions.rename(disk / "versions")
    versions.symlink_to(disk / "versions")
    (fresh / "projects" / "projects.parquet").rename(disk / "projects.parquet")
    (fresh / "projects" / "projects.parquet").symlink_to(disk / "projects.parquet")
    (disk / "secret.csv").write_text("a\n1\n")
    (fresh / "elsewhere").symlink_to(disk)
    count = "SELECT count(*) AS n FROM operations"
    result = invoke("query", "--data-dir", str(fresh), "--format", "csv", count)
    assert (result.exit_code, result.stdout) == (0, "n\n12\n")
    projects = "SELECT count(*) AS n FROM projects"
    result = invoke("query", "--data-dir", str(fresh), "--format", "csv", projects)
    assert (result.exit_code, result.stdout) == (0, "n\n2\n")
    result = invoke("report", "--data-dir", str(fresh), "--format", "csv")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert next(x for x in lines if x.startswith("failures,")).startswith(
        "failures,,,,,,start_compute,,,,6,,,2,"
    )
    for path in (f"{fresh}/elsewhere/secret.csv", f"{disk}/secret.csv"):
        result = invoke("query", "--data-dir", str(fresh), f"SELECT * FROM read_csv('{path}')")
        assert (result.exit_code, result.stdout) == (7, "")
        assert result.stderr.startswith(_no_access(path))
