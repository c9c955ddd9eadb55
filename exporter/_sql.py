"""The SQL layer: loads `sql/*.sql` in order into DuckDB; `connect()`; the `opsaudit.duckdb` file.

The .sql files are written for a person in the DuckDB CLI, with paths relative to the data
directory. This module makes those paths absolute and, for a source that has no file yet,
substitutes an empty relation with the same columns and types, so every view answers on an
empty data directory. Nothing here takes a lock on a file the sync writes: Parquet files are
only read, and `opsaudit.duckdb` is replaced by rename, never opened for writing in place.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from exporter._errors import QueryError
from exporter._storage import PROJECTS_SCHEMA, SYNC_RUNS_SCHEMA, VERSIONS_SCHEMA

__all__ = [
    "VIEWS_DB",
    "connect",
    "execute",
    "list_macros",
    "list_views",
    "sql_dir",
    "sql_files",
    "write_views_database",
]

VIEWS_DB = "opsaudit.duckdb"

# The relative paths the .sql files read, and the columns of each when no file exists yet.
# created_month is not stored in the files: it comes from the Hive path (DESIGN.md).
_SOURCES: dict[str, pa.Schema] = {
    "operation_versions/*/*.parquet": VERSIONS_SCHEMA.append(
        pa.field("created_month", pa.string())
    ),
    "projects/projects.parquet": PROJECTS_SCHEMA,
    "sync_runs/sync_runs.parquet": SYNC_RUNS_SCHEMA,
}
# A read_parquet call whose first argument is a quoted path. Its other arguments contain no
# parentheses (only `name = value` and `{...}`), so `[^()]*` spans them, newlines included.
_READ_PARQUET = re.compile(r"read_parquet\(\s*'(?P<path>[^']*)'[^()]*\)")
_CREATE = re.compile(
    r"^CREATE\s+OR\s+REPLACE\s+(?P<kind>VIEW|MACRO)\s+(?P<name>\w+)", re.IGNORECASE | re.MULTILINE
)


def sql_dir() -> Path:
    """Where the .sql files are: `exporter/sql` in a wheel, `<repo>/sql` in an editable install."""
    package = Path(__file__).resolve().parent
    for candidate in (package / "sql", package.parent / "sql"):
        if candidate.is_dir() and any(candidate.glob("*.sql")):
            return candidate
    raise QueryError(f"the SQL view definitions are missing (looked in {package / 'sql'})")


def sql_files() -> list[Path]:
    """The .sql files in load order: their number prefixes make the order explicit."""
    return sorted(sql_dir().glob("[0-9][0-9]_*.sql"))


def _defined(kind: str) -> list[str]:
    names: list[str] = []
    for path in sql_files():
        names += [m["name"] for m in _CREATE.finditer(path.read_text()) if m["kind"] == kind]
    return names


def list_views() -> list[str]:
    """Names of the views the .sql files define, in load order."""
    return _defined("VIEW")


def list_macros() -> list[str]:
    """Names of the macros (parameterised views such as stuck_operations_older_than)."""
    return _defined("MACRO")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _empty_relation(schema: pa.Schema) -> str:
    """A SELECT of zero rows with the schema's column names and DuckDB types."""
    types = duckdb.connect().from_arrow(schema.empty_table()).types
    columns = ", ".join(
        f"CAST(NULL AS {t}) AS {_ident(f.name)}" for f, t in zip(schema, types, strict=True)
    )
    return f"(SELECT {columns} WHERE false)"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _exists(data_dir: Path, relative: str) -> bool:
    if "*" in relative:
        return next(data_dir.glob(relative), None) is not None
    return (data_dir / relative).is_file()


def _resolve(text: str, data_dir: Path, present: dict[str, bool]) -> str:
    """The SQL text with each source path made absolute, or replaced by an empty relation."""

    def replace(match: re.Match[str]) -> str:
        relative = match["path"]
        if relative not in _SOURCES:
            return match[0]
        if not present[relative]:
            return _empty_relation(_SOURCES[relative])
        absolute = (data_dir / relative).as_posix()
        start, end = match.span("path")
        whole = match[0]
        offset = match.start()
        return whole[: start - offset - 1] + _quote(absolute) + whole[end - offset + 1 :]

    return _READ_PARQUET.sub(replace, text)


def _load(
    con: duckdb.DuckDBPyConnection, data_dir: Path, only: Sequence[str] | None = None
) -> None:
    data_dir = data_dir.resolve()
    present = {relative: _exists(data_dir, relative) for relative in _SOURCES}
    for path in sql_files():
        if only is not None and path.name not in only:
            continue
        try:
            con.execute(_resolve(path.read_text(), data_dir, present))
        except duckdb.Error as exc:
            raise QueryError(f"loading {path.name}: {_first_line(exc)}") from exc


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def connect(data_dir: Path, *, only: Sequence[str] | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every view over `data_dir` defined.

    The views see the files that exist when they are read; a source that had no file at all
    when connecting stays empty for this connection (connect again after the first sync).
    `only` names the .sql files to load (e.g. the report's): each view costs a bind, which
    reads Parquet metadata, so a command that needs three views need not define thirty.
    """
    con = duckdb.connect(":memory:")
    try:
        # UTC everywhere: created_at::DATE must be the same day as the created_date partition.
        con.execute("SET TimeZone = 'UTC'")
        # Binding each view reads the first file's footer; cache footers across binds/queries.
        con.execute("SET parquet_metadata_cache = true")
        _load(con, Path(data_dir), only)
    except BaseException:
        con.close()
        raise
    return con


def execute(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None = None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one query; its column names and rows. DuckDB errors become `QueryError`."""
    try:
        cursor = con.execute(sql, params) if params is not None else con.execute(sql)
        if cursor.description is None:  # a statement with no result (SET, CREATE, ...)
            return [], []
        columns = [d[0] for d in cursor.description]
        return columns, cursor.fetchall()
    except duckdb.Error as exc:
        raise QueryError(_first_line(exc)) from exc


def _held_by_another_connection(path: Path) -> bool:
    """True if a writer (another process, or this one) has `path` open in DuckDB."""
    try:
        # A read-only open takes a shared lock and fails at once (never waits) when a writer
        # holds the exclusive one; in this process DuckDB refuses a second open of the same
        # file with a different mode. Readers-only are fine: a rename leaves them their copy.
        probe = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        message = str(exc).lower()
        return "lock" in message or "different configuration" in message
    probe.close()
    return False


def write_views_database(data_dir: Path) -> Path | None:
    """Create or refresh `<data_dir>/opsaudit.duckdb` (views only, absolute paths), atomically.

    Returns the path, or None when a program holds the file open for writing (a DuckDB shell,
    a notebook): the sync must never wait for a reader, and the next sync refreshes the file.
    """
    data_dir = Path(data_dir).resolve()
    target = data_dir / VIEWS_DB
    if target.exists() and _held_by_another_connection(target):
        return None
    tmp = data_dir / f".{VIEWS_DB}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        con = duckdb.connect(str(tmp))
        try:
            _load(con, data_dir)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        # A WAL left by a crashed writer of the old file would be replayed against the new one.
        Path(f"{target}.wal").unlink(missing_ok=True)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    return target
