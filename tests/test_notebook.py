"""The overview notebook runs top to bottom on a small demo dataset and produces every plot."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "overview.ipynb"


def _load_builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "build_notebook", ROOT / "scripts" / "build_notebook.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


builder = _load_builder()


def test_committed_notebook_is_generated_and_clean() -> None:
    text = NOTEBOOK.read_text()
    assert text == builder.render(), "run python scripts/build_notebook.py"
    nb = json.loads(text)
    for cell in nb["cells"]:
        if cell["cell_type"] == "code":
            assert cell["outputs"] == []
            assert cell["execution_count"] is None
    for leak in ("/tmp/", "/home/", "/work/", "/Users/"):
        assert leak not in text
    # A notebook is what users copy from: only the public API (issue 23).
    assert "exporter._" not in text
    assert "from exporter import _" not in text


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `python3` kernelspec that runs this interpreter (the venv's), whatever is installed."""
    from ipykernel.kernelspec import install

    prefix = tmp_path_factory.mktemp("kernel")
    install(prefix=str(prefix), kernel_name="python3")
    spec_file = prefix / "share" / "jupyter" / "kernels" / "python3" / "kernel.json"
    spec = json.loads(spec_file.read_text())
    # install() records sys.executable; make sure nothing else gets picked up.
    assert spec["argv"][0] == sys.executable
    return prefix / "share" / "jupyter"


@pytest.mark.slow
# Third-party deprecations raised while a kernel starts (jupyter_client / jupyter_core / zmq on
# newer Pythons); our own code stays under filterwarnings=error.
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_client")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:jupyter_core")
@pytest.mark.filterwarnings("ignore::DeprecationWarning:zmq")
@pytest.mark.filterwarnings("ignore:.*Jupyter is migrating its paths.*:DeprecationWarning")
def test_notebook_runs_and_plots(
    tmp_path: Path, kernel_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nbformat
    from nbclient import NotebookClient

    from exporter.demo import run_demo

    data_dir = tmp_path / "data"
    out = tmp_path / "plots"
    result = run_demo(data_dir, projects=3, days=4)
    assert result.summary.outcome == "ok"

    monkeypatch.setenv("OPSAUDIT_DATA_DIR", str(data_dir))
    monkeypatch.setenv("OPSAUDIT_NOTEBOOK_OUT", str(out))
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    # Kernels started by nbclient inherit os.environ: a headless backend and no user config.
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("JUPYTER_PLATFORM_DIRS", "1")

    nb = nbformat.read(NOTEBOOK, as_version=4)
    # One extra cell, not committed: proves the kernel is this venv's interpreter.
    nb.cells.append(nbformat.v4.new_code_cell("import sys; print(sys.executable)"))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=180,
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()

    errors = [
        out_.get("ename")
        for cell in nb.cells
        for out_ in cell.get("outputs", [])
        if out_.get("output_type") == "error"
    ]
    assert errors == []
    for name in builder.FIGURES:
        png = out / name
        assert png.exists(), name
        assert png.stat().st_size > 1000, name
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    assert nb.cells[-1].outputs[0]["text"].strip() == sys.executable
    # The per-branch cell names branches (issue 21): its table's first row is the branch and
    # action with the most failed operations, counted here in Python from the rows.
    [branch_cell] = [c for c in nb.cells if "failures_by_branch.png" in c.source]
    shown = [
        o["data"]["text/markdown"]
        for o in branch_cell.outputs
        if "text/markdown" in o.get("data", {})
    ]
    import exporter

    con = exporter.connect(data_dir)
    try:
        ops = con.execute(
            "SELECT o.action, o.branch_id, b.name, b.deleted_at IS NOT NULL FROM operations AS o "
            "LEFT JOIN branches AS b ON b.id = o.branch_id "
            "WHERE o.failures_count > 0 AND o.branch_id IS NOT NULL"
        ).fetchall()
    finally:
        con.close()
    counts: dict[tuple[str, str, str, bool], int] = {}
    for action, branch_id, name, deleted in ops:
        key = (action, name, branch_id, deleted)
        counts[key] = counts.get(key, 0) + 1
    top = min(counts, key=lambda k: (-counts[k], k[2], k[0]))
    assert top[1] is not None  # the demo's branches are listed: a name
    first_row = shown[0].splitlines()[2]
    assert first_row == (
        f"| {top[0]} | {top[1]} | {top[2]} | {str(top[3]).lower()} | {counts[top]} |"
    )
