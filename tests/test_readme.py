"""The README tells the truth: real `--help` text, real set-up commands, every code and variable."""

from __future__ import annotations

import importlib.util
import re
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

from exporter.core.errors import ExitCode

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


update_readme = _script("update_readme")
check_setup = _script("check_setup_commands")


def test_command_reference_matches_real_help() -> None:
    assert update_readme.render(README) == README, "run python scripts/update_readme.py"


def test_command_reference_covers_every_command() -> None:
    names = update_readme.command_names()
    assert {"sync", "status", "compact", "demo"} <= set(names)
    for name in names:
        assert f"$ opsaudit {name} --help\nUsage: opsaudit {name} " in README, name


def test_setup_commands() -> None:
    demo, tests = check_setup.setup_commands(README)
    assert demo == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && opsaudit demo"
    )
    assert tests == (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
        "&& python -m pytest -q"
    )


def test_ci_runs_the_readme_commands() -> None:
    ci = (ROOT / ".ci" / "run").read_text().splitlines()
    # CI runs the README's set-up lines themselves (the test command among them) in fresh
    # copies: the test command is the README's by construction. The first (the demo) runs in
    # the background and CI waits for it.
    # (Byte-compiling every installed module is left to the imports: the commands are the same.)
    assert 'PIP_COMPILE=0 "$PY" scripts/check_setup_commands.py --only 1 >"$demo_log" 2>&1 &' in ci
    assert "PIP_COMPILE=0 python scripts/check_setup_commands.py --only 2" in ci
    assert 'if ! wait "$demo"; then' in ci


def _ci_trap() -> str:
    lines = (ROOT / ".ci" / "run").read_text().splitlines()
    (trap,) = [line for line in lines if line.startswith("trap ") and line.endswith(" EXIT")]
    return trap


@pytest.mark.parametrize(("last_step", "code"), [("true", 0), ("false", 1)])
def test_ci_exit_code_is_its_last_steps(tmp_path: Path, last_step: str, code: int) -> None:
    # CI's EXIT trap runs after the demo was waited for: it must not turn a passing run into
    # a failing one (the trap's kill of a reaped demo failed under `set -e`), nor hide a failure.
    # The same of the mutants, in the background too (and not yet started when a step before
    # them fails).
    logs = [tmp_path / "demo.log", tmp_path / "mutants.log"]
    for mutants in ('mutants=""', 'true &\nmutants=$!\nwait "$mutants"'):
        for log in logs:
            log.write_text("output")
        script = "\n".join(
            [
                "set -euo pipefail",
                f"demo_log={logs[0]}",
                f"mutants_log={logs[1]}",
                "true &",
                "demo=$!",
                _ci_trap(),
                'wait "$demo"',
                mutants,
                last_step,
            ]
        )
        result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
        assert (result.returncode, result.stderr) == (code, "")
        assert not any(log.exists() for log in logs)


def test_every_exit_code_is_documented() -> None:
    rows = dict(re.findall(r"^\| (\d+) \| ([^|]+) \|", README, re.MULTILINE))
    assert sorted(int(code) for code in rows) == sorted(int(code) for code in ExitCode)


def test_every_environment_variable_is_documented() -> None:
    sources = [p.read_text() for p in (ROOT / "exporter" / "cli").glob("*.py")]
    read = set()
    for text in sources:
        read |= set(re.findall(r"""environ(?:\.get)?[\[(]["']([A-Z_]+)["']""", text))
        read |= set(re.findall(r"""envvar=["']([A-Z_]+)["']""", text))
    read.add("NEON_API_KEY")
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", README, re.MULTILINE))
    assert read <= documented
    assert "OPSAUDIT_NOTEBOOK_OUT" in documented


def test_every_view_and_column_is_documented(tmp_path: Path) -> None:
    from exporter.analytics.views import connect, list_views

    con = connect(tmp_path)  # an empty data dir: every view exists and answers 0 rows
    try:
        for name in list_views():
            assert f"`{name}" in README, f"view {name} is not in the README"
            try:
                columns = [r[0] for r in con.execute(f"DESCRIBE {name}").fetchall()]
            except Exception:  # a macro, not a view
                continue
            row = re.search(rf"^\| `{name}` \|[^|]*\| (.*) \|$", README, re.MULTILINE)
            if row:  # the report views' table: exactly these columns, in this order
                assert row.group(1) == "`" + ", ".join(columns) + "`", name
            else:  # the base views, described in prose and tables
                for column in columns:
                    assert f"`{column}`" in README or f", {column}" in README, (name, column)
    finally:
        con.close()
