"""DuckDB for opsaudit's own commands: the engine, without the `duckdb` package's Python layer.

`import duckdb` (2.x) builds its relation API in Python (some forty dataclasses) and asks
`importlib.metadata` for its own version: ~70-100 ms of every `opsaudit query`, `report` and
views-database child (bench/README.md, row 11). The commands only connect, execute and fetch,
which the engine's extension module `_duckdb` serves alone; `duckdb` re-exports the very same
classes and exceptions, so `duck.duckdb.Error` is `duckdb.Error`.

Two things need the package on top (`whole_package`): scanning a Python Arrow object
(`con.register`, which calls back into readers the package installs on import) and the relation
API a notebook uses on `exporter.connect()`'s connection (`.sql(...).df()`). A DuckDB without a
separate engine module gets the package itself.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator
from pathlib import Path

try:
    import _duckdb as duckdb
except ImportError:  # DuckDB releases before the engine moved to its own module
    import duckdb  # type: ignore[no-redef]


def whole_package() -> None:
    """Load the `duckdb` package over the engine (once per process; every connection, made
    before or after, gains what it adds): before `con.register` of an Arrow object, and for a
    connection handed to a notebook."""
    import duckdb as _package  # noqa: F401


@contextlib.contextmanager
def readable_dir(directory: Path) -> Iterator[Path]:
    """`directory`, or a symlink to it whose path DuckDB reads as one directory: its
    `file_search_path` is a comma-separated list and `ATTACH` reads a `?` as the start of
    options (a data directory `a,b` was two to it: its `opsaudit.duckdb` could not be written).
    The symlink lives as long as the block."""
    if not any(c in directory.as_posix() for c in ",?"):
        yield directory
        return
    with tempfile.TemporaryDirectory(prefix="opsaudit-dir-") as tmp:
        alias = Path(tmp) / "data"
        alias.symlink_to(directory.resolve(), target_is_directory=True)
        yield alias


__all__ = ["duckdb", "readable_dir", "whole_package"]
