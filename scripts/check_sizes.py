"""Size check (issue 20): no module over MAX_MODULE_LINES and no function over MAX_FUNCTION_LINES
in exporter/, except those listed below, each with its reason. The lists hold what was over the
limits when the check was added; they may only shrink: an entry no longer needed fails the check
too, so a split is recorded by deleting its line.

    python scripts/check_sizes.py      # exit 0: within limits or excepted; 1: what to do, listed
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_MODULE_LINES = 450
MAX_FUNCTION_LINES = 60

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "exporter"

# path (relative to the repository) -> why it is still longer than MAX_MODULE_LINES.
MODULE_EXCEPTIONS: dict[str, str] = {
    "exporter/ops/check.py": "every check of the trail; to split by what it reads (state, views)",
    "exporter/api/client.py": "the API client, its retry policy and the key checks",
    "exporter/ops/doctor.py": "one probe per thing doctor checks; each could be its own module",
    "exporter/analytics/views.py": "the .sql loader, connect(), the read-only guard and the views database",
    "exporter/store/state.py": "DDL, migrations and every table's queries (one declaration per table)",
    "exporter/engine/sync.py": "the run, the committer thread and the run summary",
    "exporter/engine/walk.py": "the walk and the refresh of open operations in one class",
    "exporter/store/lake/objects.py": "local and remote object stores and their credentials",
    "exporter/store/lake/location.py": "the --data-dir forms and the storage options' allow-list "
    "with each option's type (split: the options to their own module)",
    "exporter/store/lake/tables.py": "the Delta tables: open, commit, snapshot, compact, vacuum",
    "exporter/store/lake/lease.py": "the lease: take, renew, fence, release, and the holder "
    "check with the runs it names (split: LeaseInfo and Ended to their own module)",
    "exporter/store/local/dataset.py": "the local store: staged commit with its two records, "
    "their one-time migration, recovery, compaction",
    "exporter/simulator/_world.py": "the simulated platform's state: operations, names, controls",
    "exporter/analytics/html.py": "the one page: its headline, tables and five charts",
}

# "path:qualified.name" -> why it is still longer than MAX_FUNCTION_LINES.
FUNCTION_EXCEPTIONS: dict[str, str] = {
    "exporter/ops/check.py:_check_state": "every finding the state answers, in one pass",
    "exporter/api/client.py:ApiClient._attempt": "one request: each answer mapped, in order",
    "exporter/demo.py:run_demo": "simulator, sync and the demo's files, in order",
    "exporter/ops/doctor.py:_probe": "the API probe's outcomes, each with its message",
    "exporter/analytics/html.py:_figures": "one figure after another",
    "exporter/ops/metrics.py:collect_metrics": "every metric family in exposition order",
    "exporter/analytics/report.py:build_report": "the report's sections in order",
    "exporter/engine/sync.py:_Run._sync": "the run's phases in order",
    "exporter/engine/walk.py:ProjectWalk._main_walk": "the page loop and its stop rules",
    "exporter/cli/_sync.py:sync_command": "the sync command's options turned into its config",
    "exporter/store/lake/tables.py:LakeDataset.open": "each way opening a lake dataset can fail",
    "exporter/store/lake/tables.py:LakeDataset.commit": "the lake commit protocol's steps",
    "exporter/simulator/_generate.py:OpFactory._one": "one operation's fields, drawn in order",
    "exporter/simulator/_live.py:progress": "the live progress loop",
}


def module_lengths() -> dict[str, int]:
    return {
        path.relative_to(ROOT).as_posix(): len(path.read_text().splitlines())
        for path in sorted(PACKAGE.rglob("*.py"))
    }


def function_lengths() -> dict[str, int]:
    """Every function and method, by "path:Class.name" (nested ones by their enclosing names),
    with its length in lines from `def` (decorators excluded) to its last line."""
    out: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()

        def visit(node: ast.AST, prefix: str, relative: str = relative) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    name = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        end = child.end_lineno or child.lineno
                        out[f"{relative}:{name}"] = end - child.lineno + 1
                    visit(child, f"{name}.")
                else:
                    visit(child, prefix)

        visit(ast.parse(path.read_text(), filename=str(path)), "")
    return out


def problems() -> list[str]:
    found: list[str] = []
    for kind, lengths, limit, exceptions in (
        ("module", module_lengths(), MAX_MODULE_LINES, MODULE_EXCEPTIONS),
        ("function", function_lengths(), MAX_FUNCTION_LINES, FUNCTION_EXCEPTIONS),
    ):
        for name, lines in lengths.items():
            if lines > limit and name not in exceptions:
                found.append(
                    f"{kind} {name}: {lines} lines (limit {limit}); split it, or add it to "
                    f"{kind.upper()}_EXCEPTIONS in scripts/check_sizes.py with the reason"
                )
        for name in exceptions:
            if lengths.get(name, 0) <= limit:
                found.append(
                    f"{kind} {name} is within {limit} lines now (or gone): delete its line from "
                    f"{kind.upper()}_EXCEPTIONS in scripts/check_sizes.py"
                )
    return found


def main() -> int:
    found = problems()
    for line in found:
        print(line)
    if not found:
        print(
            f"sizes: within limits ({MAX_MODULE_LINES} lines a module, {MAX_FUNCTION_LINES} a "
            f"function) but for {len(MODULE_EXCEPTIONS)} modules and "
            f"{len(FUNCTION_EXCEPTIONS)} functions listed with their reasons"
        )
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
