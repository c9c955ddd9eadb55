"""Every named mutant still applies: its snippet occurs exactly once in its file.

`scripts/mutants.py` reports a stale snippet only when it runs (the last step of CI); a change
that rewrites the code a mutant breaks must update the mutant in the same commit.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _mutants() -> list:
    spec = importlib.util.spec_from_file_location(
        "opsaudit_mutants", ROOT / "scripts" / "mutants.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look the module up while building the class
    spec.loader.exec_module(module)
    return list(module.MUTANTS)


MUTANTS = _mutants()


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_the_mutant_snippet_occurs_once(mutant) -> None:  # type: ignore[no-untyped-def]
    assert (ROOT / mutant.path).read_text().count(mutant.old) == 1, mutant.path


def test_mutant_names_are_unique() -> None:
    names = [m.name for m in MUTANTS]
    assert len(names) == len(set(names))
