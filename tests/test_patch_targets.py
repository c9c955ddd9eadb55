"""Every monkeypatch and mock.patch in the suite still names something that exists (issue 20).

A patch whose target moved away patches nothing the code reads: with `raising=False`, or in a test
that is not run, it goes unnoticed and the test stops testing what it says. The targets are read
from the source of tests/ (AST), in the forms the suite uses:

- `monkeypatch.setattr("pkg.mod.name", value)`, `.delattr("pkg.mod.name")`, `mock.patch("...")`;
- `monkeypatch.setattr(obj, "name", value)`, `.delattr(obj, "name")`, `mock.patch.object(obj,
  "name")`, where `obj` is an imported module, an attribute path on one, or a class of the test
  file itself;
- `m.setattr(target, ...)` where `target` is a parameter of the test filled by
  `@pytest.mark.parametrize` with dotted strings (inline or a module-level list).

A target the scan cannot read fails too, naming the line: extend the scan rather than lose it.
"""

from __future__ import annotations

import ast
import importlib
from dataclasses import dataclass
from pathlib import Path

TESTS = Path(__file__).resolve().parent

_ATTR_PATCHERS = {"setattr", "delattr"}


@dataclass(frozen=True)
class Target:
    where: str  # file:line
    text: str  # the target as the test spells it
    problem: str | None  # None: it exists


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a Name/Attribute chain, else None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def resolve_dotted(path: str) -> str | None:
    """None if `pkg.mod.attr.attr` exists (as `monkeypatch` resolves it), else why not."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for j, name in enumerate(parts[i:], start=i):
            if not hasattr(obj, name):
                return f"{'.'.join(parts[:j])} has no attribute {name!r}"
            obj = getattr(obj, name)
        return None
    return f"no module {parts[0]!r}"


class _Scan(ast.NodeVisitor):
    """The patch targets of one test file."""

    def __init__(self, tree: ast.Module, name: str) -> None:
        self.name = name
        self.targets: list[Target] = []
        self.imports: dict[str, str] = {}  # local name -> dotted import path
        self.classes: dict[str, ast.ClassDef] = {}
        self.lists: dict[str, ast.expr] = {}  # module-level NAME = [...]
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        self.imports[a.asname] = a.name
                    else:
                        top = a.name.split(".")[0]
                        self.imports[top] = top
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                for a in node.names:
                    self.imports[a.asname or a.name] = f"{node.module}.{a.name}"
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and node.value is not None:
                        self.lists[t.id] = node.value
        self.function: ast.FunctionDef | None = None
        self.visit(tree)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer, self.function = self.function, node
        self.generic_visit(node)
        self.function = outer

    def visit_Call(self, node: ast.Call) -> None:
        self.generic_visit(node)
        func = _dotted(node.func) or ""
        leaf = func.rsplit(".", 1)[-1]
        where = f"{self.name}:{node.lineno}"
        if func.endswith("patch.object") or (leaf in _ATTR_PATCHERS and "." in func):
            self._object_or_string(node, where, string_form=leaf != "object")
        elif leaf == "patch" and func in ("patch", "mock.patch", "unittest.mock.patch"):
            self._string(node.args[0] if node.args else None, where)

    def _object_or_string(self, node: ast.Call, where: str, *, string_form: bool) -> None:
        args = node.args
        first = args[0] if args else None
        if string_form and (
            (isinstance(first, ast.Constant) and isinstance(first.value, str))
            or (isinstance(first, ast.Name) and self._parametrized(first.id) is not None)
        ):
            # setattr("pkg.mod.name", value) / delattr("pkg.mod.name"), or a parameter holding it
            self._string(first, where)
            return
        second = args[1] if len(args) > 1 else None
        if (
            first is None
            or not isinstance(second, ast.Constant)
            or not isinstance(second.value, str)
        ):
            self.targets.append(Target(where, ast.unparse(node), "target not readable"))
            return
        self._on_object(first, second.value, where)

    def _string(self, arg: ast.expr | None, where: str) -> None:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            self.targets.append(Target(where, arg.value, resolve_dotted(arg.value)))
        elif isinstance(arg, ast.Name) and (values := self._parametrized(arg.id)) is not None:
            for value in values:
                self.targets.append(Target(where, value, resolve_dotted(value)))
        else:
            text = ast.unparse(arg) if arg is not None else "(nothing)"
            self.targets.append(Target(where, text, "target not readable"))

    def _parametrized(self, param: str) -> list[str] | None:
        """The strings `@pytest.mark.parametrize` gives `param` in the enclosing test."""
        if self.function is None:
            return None
        for deco in self.function.decorator_list:
            if not (
                isinstance(deco, ast.Call)
                and (_dotted(deco.func) or "").endswith("mark.parametrize")
                and len(deco.args) >= 2
                and isinstance(deco.args[0], ast.Constant)
            ):
                continue
            names = [n.strip() for n in str(deco.args[0].value).split(",")]
            if param not in names:
                continue
            rows = deco.args[1]
            if isinstance(rows, ast.Name):
                rows = self.lists.get(rows.id, rows)
            if not isinstance(rows, ast.List | ast.Tuple):
                return None
            out = []
            for row in rows.elts:
                cell = row.elts[names.index(param)] if isinstance(row, ast.Tuple) else row
                if not (isinstance(cell, ast.Constant) and isinstance(cell.value, str)):
                    return None
                out.append(cell.value)
            return out
        return None

    def _on_object(self, obj: ast.expr, attr: str, where: str) -> None:
        path = _dotted(obj)
        text = f"{ast.unparse(obj)}.{attr}"
        if path is None:
            self.targets.append(Target(where, text, "target not readable"))
            return
        head, _, rest = path.partition(".")
        if head in self.classes and not rest:
            # A class of the test file: its body must define the attribute.
            body = self.classes[head].body
            defined = {
                t.id
                for n in body
                if isinstance(n, ast.Assign | ast.AnnAssign)
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
                if isinstance(t, ast.Name)
            } | {n.name for n in body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
            problem = None if attr in defined else f"class {head} defines no {attr!r}"
            self.targets.append(Target(where, text, problem))
        elif head in self.imports:
            full = ".".join([self.imports[head], *([rest] if rest else []), attr])
            self.targets.append(Target(where, text, resolve_dotted(full)))
        else:
            self.targets.append(Target(where, text, f"{head!r} is not imported in the file"))


def scan(source: str, name: str) -> list[Target]:
    return _Scan(ast.parse(source), name).targets


def test_every_patch_target_in_the_suite_exists() -> None:
    targets = [
        t
        for path in sorted(TESTS.rglob("*.py"))
        for t in scan(path.read_text(), str(path.relative_to(TESTS)))
    ]
    stale = [f"{t.where}: {t.text}: {t.problem}" for t in targets if t.problem]
    assert not stale, "patch targets that no longer exist:\n" + "\n".join(stale)
    # The suite patches: a scan that finds nothing has stopped reading it.
    assert any(t.where.startswith("sync/test_storage.py") for t in targets)


def test_the_scan_names_each_stale_form() -> None:
    source = """
import pytest
from exporter import cli
from exporter.cli import _common

STEPS = [("exporter.cli.main", "a"), ("exporter.cli.no_such_step", "b")]

class Handler:
    known = 1

@pytest.mark.parametrize("target, when", STEPS)
def test_a(monkeypatch, target, when):
    with monkeypatch.context() as m:
        m.setattr(target, None)

def test_b(monkeypatch):
    monkeypatch.setattr("exporter.cli.main", None)
    monkeypatch.setattr("exporter.cli.gone", None)
    monkeypatch.setattr("exporter._no_such_module.x", None)
    monkeypatch.delattr(cli, "cli")
    monkeypatch.setattr(cli, "vanished", 1)
    monkeypatch.setattr(_common.DataDir, "convert", None)
    monkeypatch.setattr(_common.DataDir, "no_method", None)
    monkeypatch.setattr(Handler, "known", 2)
    monkeypatch.setattr(Handler, "unknown", 2)
    monkeypatch.setattr(undefined, "x", 2)
    monkeypatch.setattr(make(), "x", 2)
"""
    got = [(t.where, t.text, t.problem) for t in scan(source, "t.py")]
    assert got == [
        ("t.py:14", "exporter.cli.main", None),
        ("t.py:14", "exporter.cli.no_such_step", "exporter.cli has no attribute 'no_such_step'"),
        ("t.py:17", "exporter.cli.main", None),
        ("t.py:18", "exporter.cli.gone", "exporter.cli has no attribute 'gone'"),
        ("t.py:19", "exporter._no_such_module.x", "exporter has no attribute '_no_such_module'"),
        ("t.py:20", "cli.cli", None),
        ("t.py:21", "cli.vanished", "exporter.cli has no attribute 'vanished'"),
        ("t.py:22", "_common.DataDir.convert", None),
        (
            "t.py:23",
            "_common.DataDir.no_method",
            "exporter.cli._common.DataDir has no attribute 'no_method'",
        ),
        ("t.py:24", "Handler.known", None),
        ("t.py:25", "Handler.unknown", "class Handler defines no 'unknown'"),
        ("t.py:26", "undefined.x", "'undefined' is not imported in the file"),
        ("t.py:27", "make().x", "target not readable"),
    ]
