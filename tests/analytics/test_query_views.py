"""`opsaudit query` defines only the views a query names (and what those use): start-up
(issue 13). Catalog queries still see every view."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner

from exporter.analytics.views import (
    connect,
    list_macros,
    list_views,
    memory_connection,
    sql_files,
    sql_files_for,
    sql_names_for,
)
from exporter.cli import cli


def _query(data_dir: Path, sql: str) -> list[dict[str, object]]:
    result = CliRunner().invoke(
        cli, ["query", "--data-dir", str(data_dir), "--format", "json", sql], prog_name="opsaudit"
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.output)  # type: ignore[no-any-return]


def test_a_query_loads_the_base_and_the_files_it_names() -> None:
    assert sql_files_for("select 1") == ["00_base.sql"]
    assert sql_files_for("SELECT count(*) FROM Operations") == ["00_base.sql"]
    assert sql_files_for("FROM report_by_action()") == ["00_base.sql", "90_report.sql"]


@pytest.mark.parametrize(
    "sql",
    ["SHOW TABLES", "DESCRIBE failures_by_action", "FROM duckdb_views()", "PRAGMA show_tables"],
)
def test_a_catalog_query_loads_everything(sql: str) -> None:
    assert sql_files_for(sql) is None


def test_a_file_is_loaded_with_the_files_its_views_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "00_base.sql").write_text("CREATE OR REPLACE VIEW a AS SELECT 1 AS x;\n")
    (tmp_path / "10_b.sql").write_text("CREATE OR REPLACE VIEW b AS SELECT * FROM a;\n")
    (tmp_path / "20_c.sql").write_text("CREATE OR REPLACE VIEW c AS SELECT * FROM b;\n")
    (tmp_path / "30_d.sql").write_text("CREATE OR REPLACE VIEW d AS SELECT 2 AS y;\n")
    monkeypatch.setattr("exporter.analytics.views.sql_dir", lambda: tmp_path)
    assert sql_files_for("FROM c") == ["00_base.sql", "10_b.sql", "20_c.sql"]
    assert sql_files_for("FROM b JOIN d ON true") == ["00_base.sql", "10_b.sql", "30_d.sql"]


def test_a_query_defines_only_the_views_and_macros_it_names_and_theirs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "00_base.sql").write_text(
        "-- the base\nCREATE OR REPLACE VIEW a AS SELECT 1 AS x;\n"
        "CREATE OR REPLACE MACRO twice(v) AS v * 2;\n"
        "CREATE OR REPLACE VIEW e AS SELECT twice(x) AS x FROM a;\n"
    )
    (tmp_path / "10_b.sql").write_text(
        "CREATE OR REPLACE VIEW b AS SELECT * FROM e;\nCREATE OR REPLACE VIEW c AS FROM a;\n"
    )
    monkeypatch.setattr("exporter.analytics.views.sql_dir", lambda: tmp_path)
    assert sql_names_for("select 1") == frozenset()
    assert sql_names_for("FROM B") == {"b", "e", "twice", "a"}
    assert sql_names_for("FROM c") == {"c", "a"}
    assert sql_names_for("SELECT twice(3)") == {"twice"}
    assert sql_names_for("SHOW TABLES") is None


def test_a_connection_for_a_query_defines_only_what_it_needs(data_dir: Path) -> None:
    names = sql_names_for("SELECT count(*) FROM sync_runs")
    assert names == {"sync_runs"}
    con = connect(data_dir, only=sql_files_for("FROM sync_runs"), names=names, safe=True)
    try:
        defined = con.execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal ORDER BY 1"
        ).fetchall()
        assert defined == [("sync_runs",)]
        full = connect(data_dir, safe=True, con=memory_connection())
        try:
            sql = "SELECT * FROM sync_runs ORDER BY ALL"
            assert con.execute(sql).fetchall() == full.execute(sql).fetchall()
        finally:
            full.close()
    finally:
        con.close()


def test_every_statement_of_the_sql_files_is_a_view_or_a_macro() -> None:
    """A query runs only the CREATE OR REPLACE VIEW / MACRO statements it needs, each cut from
    its file at the next one: any other statement would ride along with the one before it."""
    statements = sum(len(duckdb.extract_statements(p.read_text())) for p in sql_files())
    assert statements == len(list_views()) + len(list_macros())


def test_no_view_or_macro_shadows_a_duckdb_function_or_table() -> None:
    """A query defines only the names it mentions: one of ours left undefined must be a
    catalog error (`opsaudit query` then defines every view), never DuckDB's own function."""
    con = duckdb.connect()
    builtin = {r[0] for r in con.execute("SELECT function_name FROM duckdb_functions()").fetchall()}
    ours = {n.lower() for n in list_views() + list_macros()}
    assert ours & builtin == set()


def test_a_view_the_query_names_at_run_time_is_defined_on_a_second_try(data_dir: Path) -> None:
    """`query_table('sync_' || 'runs')` names no view in its text: the catalog error it meets
    over the views the text names makes `opsaudit query` run it again over every view."""
    runs = _query(data_dir, "SELECT count(*) AS n FROM sync_runs")[0]["n"]
    assert runs > 0
    built = _query(data_dir, "SELECT count(*) AS n FROM query_table('sync_' || 'runs')")
    assert built == [{"n": runs}]


def test_every_view_and_macro_answers_through_query(data_dir: Path) -> None:
    for name in list_views():
        assert _query(data_dir, f"SELECT count(*) AS n FROM {name}")[0]["n"] >= 0, name
    tables = {r["name"] for r in _query(data_dir, "SHOW TABLES")}
    assert tables == set(list_views())
    assert list_macros()  # macros are loaded by name too (report_by_action above)
    assert _query(data_dir, "SELECT count(*) AS n FROM report_by_action()")[0]["n"] > 0


# DuckDB's own views (duckdb_*, pragma_*, sqlite_*) left out without naming those prefixes.
_OURS = "left({}, 3) NOT IN ('duc', 'pra', 'sql')"


@pytest.mark.parametrize(
    "sql",
    [
        f"SELECT count(*) AS n FROM pg_views WHERE schemaname = 'main' AND {_OURS.format('viewname')}",
        "SELECT count(*) AS n FROM pg_class WHERE relkind = 'v' AND relnamespace = "
        f"(SELECT oid FROM pg_namespace WHERE nspname = 'main') AND {_OURS.format('relname')}",
        f"SELECT count(*) AS n FROM sqlite_schema WHERE type = 'view' AND {_OURS.format('name')}",
        f"SELECT count(*) AS n FROM sqlite_temp_master WHERE type = 'view' AND {_OURS.format('name')}",
    ],
)
def test_a_catalog_relation_without_a_catalog_word_sees_every_view(
    data_dir: Path, sql: str
) -> None:
    """DuckDB's pg_* and sqlite_* relations list the views too (pg_views, pg_class,
    sqlite_schema): a query reading them must find every view defined, as SHOW TABLES does."""
    assert _query(data_dir, sql) == [{"n": len(list_views())}]
