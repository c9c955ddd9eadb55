"""What each entry point loads: the commands that only read the state never pay for pyarrow,
DuckDB or httpx (start-up and memory, PRODUCT.md performance targets; DESIGN.md, layers)."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyarrow", "duckdb", "httpx", "deltalake")

# module -> the heavy packages importing it may load
CASES = {
    "exporter.cli": set(),  # `opsaudit --help`
    "exporter.store.state": set(),
    "exporter.store.readers": set(),  # the CLI parses --data-dir with it
    "exporter.core.names": set(),
    "exporter.ops.status": set(),
    "exporter.ops.check": set(),
    "exporter.engine.sync": {"pyarrow"},  # never DuckDB; its HTTP is api.http, not httpx
    "exporter.analytics.views": {"duckdb"},  # pyarrow only once a view needs an empty relation
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
