"""Why `opsaudit.duckdb` could not be written, and what to do (`analytics.views_db` warns with
it; the child writing the file prints it). Imports no DuckDB and nothing of a store: the sync
and the child both use it."""

from __future__ import annotations

import errno
import re
from pathlib import Path

from exporter.core.errors import AccessDeniedError, os_storage_error
from exporter.core.layout import VIEWS_DB

# How DuckDB words an OS error on a file it opens, reads or writes (its IO Error).
_DUCKDB_DENIED = re.compile(r'"([^"]+)": Permission denied')
_DUCKDB_FULL = ("No space left on device", "Disk quota exceeded")


def failure(root: Path, exc: BaseException) -> str:
    """What stopped `write_views_database` in data directory `root`, and what to do: the words
    of every command for an OS error (`os_storage_error`: a permission names the file or
    directory refused and "run as the user that owns it"), DuckDB's own too; for any other
    error, its first line and where to look (the sync warned with the bare error before)."""
    target = root / VIEWS_DB
    if isinstance(exc, OSError) and exc.errno is not None:
        return str(os_storage_error(target, exc, "cannot write"))
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[0] if lines else type(exc).__name__
    denied = _DUCKDB_DENIED.search(text)
    if denied is not None:
        return str(AccessDeniedError(denied[1]))
    for number, words in zip((errno.ENOSPC, errno.EDQUOT), _DUCKDB_FULL, strict=True):
        if words in text:
            return str(os_storage_error(target, OSError(number, words), "cannot write"))
    return (
        f"{text}; the next sync writes it again (`opsaudit doctor` says what to fix if this recurs)"
    )


__all__ = ["failure"]
