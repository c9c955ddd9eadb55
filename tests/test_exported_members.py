"""The public surface is exactly `__all__`, and every name in it resolves."""

from __future__ import annotations

import exporter


def test_all_names_resolve() -> None:
    for name in exporter.__all__:
        assert getattr(exporter, name) is not None, name


def test_public_surface() -> None:
    import types

    public = {
        n
        for n in dir(exporter)
        if not n.startswith("_") and not isinstance(getattr(exporter, n), types.ModuleType)
    } - {"annotations", "Any"}
    assert public <= set(exporter.__all__)
