"""What each entry point loads: the commands that only read the state never pay for pyarrow,
DuckDB or httpx (start-up and memory, PRODUCT.md performance targets; DESIGN.md, layers)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pyarrow", "duckdb", "_duckdb", "httpx", "deltalake")

# module -> the heavy packages importing it may load
CASES = {
    "exporter.cli": set(),  # `opsaudit --help`
    "exporter.store.state": set(),
    "exporter.store.readers": set(),  # the CLI parses --data-dir with it
    "exporter.core.names": set(),
    "exporter.ops.status": set(),
    "exporter.ops.check": set(),
    "exporter.engine.sync": {"pyarrow"},  # never DuckDB; its HTTP is api.http, not httpx
    "exporter.analytics.views": {"_duckdb"},  # the engine alone (exporter.core.duck)
}


@pytest.mark.parametrize("module", sorted(CASES))
def test_importing_loads_only_what_it_needs(module: str) -> None:
    code = f"import sys, {module}; print(' '.join(m for m in {HEAVY!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert set(out.stdout.split()) == CASES[module]


def test_parsing_a_data_dir_loads_no_lease_or_object_store_code() -> None:
    """Every reader parses --data-dir (`store.lake.location`): the lake package's lease and
    object-store modules load on first use only (`opsaudit query` start-up, ~3-5 ms)."""
    code = (
        "import sys, exporter.store.readers; "
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('exporter.store.lake'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["exporter.store.lake", "exporter.store.lake.location"]


def test_a_sync_s_duration_options_load_no_check_code() -> None:
    """`--refresh-open-every 2h` and the other durations parse without `ops.check` and the
    report formatting it loads (~12 ms of every sync's start, issue 24)."""
    code = (
        "import sys\n"
        "from exporter.cli._ops import Duration\n"
        "print(Duration().convert('2h', None, None), "
        "[m for m in ('exporter.ops.check', 'exporter.analytics.format') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "2:00:00 []"


@pytest.fixture(scope="module")
def demo_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("imports") / "data"
    argv = ["demo", "--data-dir", str(data_dir), "--projects", "2", "--days", "2"]
    subprocess.run([sys.executable, "-m", "exporter", *argv], capture_output=True, check=True)
    return data_dir


# The command as the console script runs it, then which DuckDB modules the process loaded.
_LOADED_AFTER = """
import atexit, sys
atexit.register(lambda: print("loaded:", *(m for m in ("duckdb", "_duckdb") if m in sys.modules)))
from exporter.cli import main
sys.argv = ["opsaudit", *sys.argv[1:]]
main()
"""


@pytest.mark.parametrize(
    "argv",
    [["query", "select 1"], ["report"], ["query", "select count(*) from operations"]],
    ids=["query select 1", "report", "query the views"],
)
def test_query_and_report_load_the_engine_without_the_duckdb_package(
    demo_dir: Path, argv: list[str]
) -> None:
    """`import duckdb` builds the relation API in Python (~70-100 ms of start-up, issue 24):
    the commands run on the engine module alone (`exporter.core.duck`)."""
    cmd = [sys.executable, "-c", _LOADED_AFTER, argv[0], "--data-dir", str(demo_dir), *argv[1:]]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.stdout.splitlines()[-1] == "loaded: _duckdb"


def test_names_the_files_lag_behind_are_read_without_the_duckdb_package_loaded(
    demo_dir: Path, tmp_path: Path
) -> None:
    """The names a run committed before exporting them are registered as Arrow tables, which
    the engine scans only through the package's readers: `query` loads it for them."""
    import shutil

    from exporter.core.names import EXPORTED_META, TABLES
    from exporter.store.state import StateDB

    data_dir = tmp_path / "data"
    shutil.copytree(demo_dir, data_dir)
    state = StateDB(data_dir / "state.sqlite")
    try:
        state.set_meta(EXPORTED_META, "an older generation")
        branches = len(state.names_rows(next(t for t in TABLES if t.name == "branches")))
    finally:
        state.close()
    sql = "select count(*) as n from branches"
    cmd = [sys.executable, "-c", _LOADED_AFTER, "query", "--data-dir", str(data_dir)]
    cmd += ["--format", "csv", sql]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[-1] == "loaded: duckdb _duckdb"
    assert branches > 0
    assert out.stdout.splitlines()[:-1] == ["n", str(branches)]


def test_a_notebook_s_connection_has_the_whole_duckdb_api(demo_dir: Path) -> None:
    """`exporter.connect()` hands a notebook DuckDB's relation API (`.sql(...)`), which the
    `duckdb` package adds over the engine the commands use."""
    code = (
        "import sys, exporter; con = exporter.connect(sys.argv[1]); "
        "print(con.sql('select count(*) from operations').fetchall()[0][0] > 0)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(demo_dir)], capture_output=True, text=True
    )
    assert out.stdout.strip() == "True", out.stderr
