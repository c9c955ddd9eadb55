"""`opsaudit query` defines only the views a query names (and what those use): start-up
(issue 13). Catalog queries still see every view."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from exporter.analytics.views import list_macros, list_views, sql_files_for
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


def test_every_view_and_macro_answers_through_query(data_dir: Path) -> None:
    for name in list_views():
        assert _query(data_dir, f"SELECT count(*) AS n FROM {name}")[0]["n"] >= 0, name
    tables = {r["name"] for r in _query(data_dir, "SHOW TABLES")}
    assert tables == set(list_views())
    assert list_macros()  # macros are loaded by name too (report_by_action above)
    assert _query(data_dir, "SELECT count(*) AS n FROM report_by_action()")[0]["n"] > 0
