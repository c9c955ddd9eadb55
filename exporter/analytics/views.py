"""The SQL layer: loads `sql/*.sql` in order into DuckDB; `connect()`; the `opsaudit.duckdb` file.

The .sql files are written for a person in the DuckDB CLI, with paths relative to the data
directory. This module replaces each path by the committed files (absolute for a connection,
relative in `opsaudit.duckdb`) and, for a source that has no file yet,
substitutes an empty relation with the same columns and types, so every view answers on an
empty data directory. Nothing here takes a lock on a file the sync writes: Parquet files are
only read, and `opsaudit.duckdb` is replaced by rename, never opened for writing in place.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import threading
import uuid
import weakref
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from exporter.analytics.format import JsonText
from exporter.analytics.summary_total import delete_older_totals, write_summary_total
from exporter.core.duck import duckdb, readable_dir
from exporter.core.errors import (
    ConfigError,
    QueryError,
    ReadOnlyError,
    StorageError,
    check_type,
)
from exporter.core.layout import (
    BASE_VIEWS,
    FLAGGED_GLOB,
    PROJECTS_FILE,
    SOURCES,
    SUMMARY_GLOB,
    SUMMARY_TOTAL_GLOB,
    SUPERSEDED_GLOB,
    SYNC_RUNS_FILE,
    VERSIONS_GLOB,
    VIEWS_DB,
    find_sql_dir,
    fsync_dir,
)
from exporter.core.names import TABLES as NAMES_TABLES
from exporter.core.pathcheck import plain_path
from exporter.store.base import Reader, Source
from exporter.store.lake.location import DATA_DIR_EXPECTED
from exporter.store.local.reader import LocalReader, damaged_in, local_sources
from exporter.store.readers import open_readers

if TYPE_CHECKING:
    import pyarrow as pa

log = logging.getLogger("opsaudit.storage")

__all__ = [
    "VIEWS_DB",
    "check_read_only",
    "connect",
    "execute",
    "execute_batches",
    "is_file_gone",
    "is_missing_definition",
    "list_macros",
    "list_views",
    "memory_connection",
    "source_definitions",
    "sql_dir",
    "sql_files",
    "sql_files_for",
    "sql_names_for",
    "write_views_database",
]

# The superseded record of a dataset that has none (written before it, not yet migrated; files
# without a state; object storage; several datasets read together, whose `operation_versions`
# keeps one dataset's history per operation): derived from the versions, exactly what the
# record holds, at the cost of a second scan of the ids (of the stored rows: no names joined).
_DERIVED_SUPERSEDED = (
    "(SELECT id, version - 1 AS version FROM stored_operation_versions WHERE version > 1)"
)


def _source_schema(relative: str) -> pa.Schema:
    """The columns of a source, for the empty relation that stands in when it has no file yet.

    Imported here, not at the top: a dataset with files never needs pyarrow to be queried
    (`opsaudit query` start-up). created_month is not stored in the files: it comes from the
    Hive path (DESIGN.md).
    """
    import pyarrow as pa

    from exporter.core.names import schema
    from exporter.core.tables import (
        FLAGGED_SCHEMA,
        PROJECTS_SCHEMA,
        SUMMARY_SCHEMA,
        SUPERSEDED_SCHEMA,
        SYNC_RUNS_SCHEMA,
        VERSIONS_SCHEMA,
    )

    return {
        VERSIONS_GLOB: VERSIONS_SCHEMA.append(pa.field("created_month", pa.string())),
        SUPERSEDED_GLOB: SUPERSEDED_SCHEMA,
        SUMMARY_GLOB: SUMMARY_SCHEMA,
        SUMMARY_TOTAL_GLOB: SUMMARY_SCHEMA,
        FLAGGED_GLOB: FLAGGED_SCHEMA,
        PROJECTS_FILE: PROJECTS_SCHEMA,
        SYNC_RUNS_FILE: SYNC_RUNS_SCHEMA,
        **{t.file: schema(t) for t in NAMES_TABLES},
    }[relative]


# A read_parquet call whose first argument is a quoted path. Its other arguments contain no
# parentheses (only `name = value` and `{...}`), so `[^()]*` spans them, newlines included.
_READ_PARQUET = re.compile(r"read_parquet\(\s*'(?P<path>[^']*)'[^()]*\)")
_CREATE = re.compile(
    r"^CREATE\s+OR\s+REPLACE\s+(?P<kind>VIEW|MACRO)\s+(?P<name>\w+)", re.IGNORECASE | re.MULTILINE
)


def sql_dir() -> Path:
    """Where the .sql files are: `exporter/sql` in a wheel, `<repo>/sql` in an editable install."""
    found = find_sql_dir()
    if found is None:
        package = Path(__file__).resolve().parents[1]  # exporter/
        raise QueryError(f"the SQL view definitions are missing (looked in {package / 'sql'})")
    return found


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


# Words that make a query look at the catalog (SHOW TABLES, duckdb_views(), ...): every view
# must be defined for those.
_CATALOG_WORDS = frozenset(
    {"show", "describe", "summarize", "information_schema", "pg_catalog", "sqlite_master"}
)
# ... and prefixes: duckdb_views(), pragma_show_tables(), and the pg_catalog and sqlite
# relations DuckDB answers without their schema (pg_views, pg_class, sqlite_schema).
_CATALOG_PREFIXES = ("duckdb_", "pragma", "pg_", "sqlite_")
_WORD = re.compile(r"[a-z_][a-z0-9_]*")


def sql_files_for(sql: str) -> list[str] | None:
    """The .sql files a query needs: 00_base.sql, each file defining a name the query mentions,
    and what those mention in turn; None (all of them) when it looks at the catalog.

    Each view costs a bind, which reads Parquet metadata: `opsaudit query "select 1"` need not
    define thirty (start-up, PRODUCT.md performance targets). A name mentioned only in a string
    or a comment loads one file too many, never one too few.
    """
    words = set(_WORD.findall(sql.lower()))
    if words & _CATALOG_WORDS or any(w.startswith(_CATALOG_PREFIXES) for w in words):
        return None
    files = sql_files()
    defines = {
        path.name: {m["name"].lower() for m in _CREATE.finditer(path.read_text())} for path in files
    }
    texts = {path.name: path.read_text().lower() for path in files}
    needed = {files[0].name} if files else set()
    pending = [words]
    while pending:
        mentioned = pending.pop()
        for name, names in defines.items():
            if name not in needed and names & mentioned:
                needed.add(name)
                pending.append(set(_WORD.findall(texts[name])))
    return [path.name for path in files if path.name in needed]


def _definitions(path: Path) -> list[tuple[str | None, str]]:
    """(lower-case name, text) of each CREATE OR REPLACE of a .sql file, in order; what comes
    before the first one is (None, text): comments, run whenever the file is."""
    text = path.read_text()
    starts = [m.start() for m in _CREATE.finditer(text)]
    names = [m["name"].lower() for m in _CREATE.finditer(text)]
    pieces: list[tuple[str | None, str]] = [(None, text[: starts[0] if starts else len(text)])]
    for i, start in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        pieces.append((names[i], text[start:end]))
    return pieces


def sql_names_for(sql: str) -> frozenset[str] | None:
    """The views and macros (lower-case names) a query needs: those it mentions and what their
    definitions mention in turn; None (every one) when it looks at the catalog.

    `opsaudit query "select 1"` then binds no view and `FROM projects` one, not fifteen
    (start-up, PRODUCT.md performance targets). A name mentioned only in a string or a comment
    defines one view too many; a name the query builds at run time (`query_table('x' || 'y')`)
    is a catalog error, on which `opsaudit query` runs it again over every view.
    """
    words = set(_WORD.findall(sql.lower()))
    if words & _CATALOG_WORDS or any(w.startswith(_CATALOG_PREFIXES) for w in words):
        return None
    bodies = {
        name: set(_WORD.findall(text.lower()))
        for path in sql_files()
        for name, text in _definitions(path)
        if name is not None
    }
    needed: set[str] = set()
    pending = [words]
    while pending:
        mentioned = pending.pop()
        for name in mentioned & bodies.keys() - needed:
            needed.add(name)
            pending.append(bodies[name])
    return frozenset(needed)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


# DuckDB's name of each Arrow type our tables use (what `from_arrow` gives, which imports numpy
# and pandas for it: ~0.35 s and ~75 MiB more in every process that met an empty source). A
# type not listed is a KeyError: a new column type is added here, and a test compares the map
# with DuckDB's own for every source.
_DUCKDB_TYPES = {
    "string": "VARCHAR",
    "int64": "BIGINT",
    "int32": "INTEGER",
    "bool": "BOOLEAN",
    "double": "DOUBLE",
    "date32[day]": "DATE",
    "timestamp[us, tz=UTC]": "TIMESTAMP WITH TIME ZONE",
}


def duckdb_type(arrow_type: pa.DataType) -> str:
    """The DuckDB type DuckDB reads an Arrow column of `arrow_type` as."""
    return _DUCKDB_TYPES[str(arrow_type)]


def _empty_relation(schema: pa.Schema) -> str:
    """A SELECT of zero rows with the schema's column names and DuckDB types."""
    columns = ", ".join(f"CAST(NULL AS {duckdb_type(f.type)}) AS {_ident(f.name)}" for f in schema)
    return f"(SELECT {columns} WHERE false)"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _resolve(text: str, sources: dict[str, Any]) -> str:
    """The SQL text with each source path replaced by its files, or by an empty relation
    (a source given as a string: the relation that replaces the whole call, object storage)."""

    def replace(match: re.Match[str]) -> str:
        relative = match["path"]
        if relative not in SOURCES:
            return match[0]
        files = sources[relative]
        if isinstance(files, str) and files:
            return files
        if not files:
            return _empty_relation(_source_schema(relative))
        listed = _quote(files[0]) if len(files) == 1 else f"[{', '.join(map(_quote, files))}]"
        start, end = match.span("path")
        whole = match[0]
        offset = match.start()
        return whole[: start - offset - 1] + listed + whole[end - offset + 1 :]

    return _READ_PARQUET.sub(replace, text)


def _load(
    con: duckdb.DuckDBPyConnection,
    sources: dict[str, Any],
    only: Sequence[str] | None,
    data_dirs: Sequence[Path],
    names: Collection[str] | None = None,
) -> None:
    """Run the .sql files of `only` (None: all); with `names`, only those definitions of them.
    `data_dirs`: the local data directories `sources` name files of (`_query_error`)."""
    for path in sql_files():
        if only is not None and path.name not in only:
            continue
        if names is None:
            text = path.read_text()
        else:
            text = "".join(t for n, t in _definitions(path) if n is None or n in names)
        try:
            con.execute(_resolve(text, sources))
            if path.name == _REPORT_SQL and (names is None or "report_summary_total" in names):
                con.execute(_summary_total_view(sources.get(SUMMARY_TOTAL_GLOB)))
        except duckdb.Error as exc:
            message = f"loading {path.name}: {_first_line(exc)}"
            raise _query_error(exc, message, data_dirs) from exc


_REPORT_SQL = "90_report.sql"


def _query_error(
    exc: duckdb.Error, message: str, data_dirs: Sequence[Path]
) -> StorageError | QueryError:
    """`QueryError(message)` (exit 7), unless DuckDB failed on a file of a dataset in
    `data_dirs` (the local ones read) that is not Parquet: then the dataset's error (exit 6,
    naming the file and the fix), not the query's."""
    return damaged_in(str(exc), data_dirs) or QueryError(message)


# The local data directories each connection of `connect` reads, for `_execute`'s errors
# (`_query_error`); weak: a connection dropped takes its entry with it.
_DATA_DIRS: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection, list[Path]] = (
    weakref.WeakKeyDictionary()
)


def _summary_total_view(files: Any) -> str:
    """`report_summary_total` over the summary's total the dataset's reader named (the total of
    exactly the summary files it reads), or empty where it named none (object storage, several
    datasets: no entry): 90_report.sql defines it empty (what a reader by hand gets), the
    loader names the file."""
    relation = (
        f"read_parquet({_quote(files[0])})"
        if isinstance(files, list) and files
        else _empty_relation(_source_schema(SUMMARY_TOTAL_GLOB))
    )
    return f"CREATE OR REPLACE VIEW report_summary_total AS SELECT * FROM {relation}"


def _dataset_sources(con: duckdb.DuckDBPyConnection, reader: Reader, tag: str) -> dict[str, Any]:
    """What each .sql source path reads for one dataset, as its storage says
    (`store.base.Reader`); a superseded record it does not have is derived. A summary record it
    does not have reads as empty: the report then summarises the rows themselves
    (sql/90_report.sql, report_summary_recorded); so does a flagged record it does not have
    (the report then finds those rows in every version: report_flagged_recorded)."""
    return _derive_missing(reader.sources(con, tag))


def _derive_missing(given: dict[str, Source]) -> dict[str, Any]:
    sources: dict[str, Any] = dict(given)
    if sources.get(SUPERSEDED_GLOB) is None:
        sources[SUPERSEDED_GLOB] = _DERIVED_SUPERSEDED
    if sources.get(SUMMARY_GLOB) is None:
        sources[SUMMARY_GLOB] = []
    if sources.get(FLAGGED_GLOB) is None:
        sources[FLAGGED_GLOB] = []
    return sources


# With several datasets each one's base views live in their own schema (d1, d2, ...) and these
# views in `main` join them, with a `dataset` column. An operation that several datasets hold
# (a shared project exported per account) keeps the history of the one that saw its newest
# state (updated_at, then observed_at, then the order given): versions are numbered within a
# dataset, so every view and macro over `operation_versions` stays exact as it is.
_UNION_VIEWS = """
CREATE OR REPLACE VIEW stored_operation_versions AS
{owner}
SELECT v.* EXCLUDE (_rank)
FROM ({stored}) AS v
SEMI JOIN owner ON v.id = owner.id AND v._rank = owner._rank;
CREATE OR REPLACE VIEW operation_versions AS
{owner}
SELECT v.* EXCLUDE (_rank)
FROM ({versions}) AS v
SEMI JOIN owner ON v.id = owner.id AND v._rank = owner._rank;
CREATE OR REPLACE VIEW projects AS
SELECT * EXCLUDE (_rank) FROM ({projects})
QUALIFY row_number() OVER (PARTITION BY id ORDER BY last_seen_at DESC NULLS LAST, _rank) = 1;
CREATE OR REPLACE VIEW sync_runs AS SELECT * EXCLUDE (_rank) FROM ({sync_runs});
"""
_OWNER = """WITH owner AS (
    SELECT id, _rank FROM ({latest})
    QUALIFY row_number() OVER (
        PARTITION BY id ORDER BY updated_at DESC, observed_at DESC, _rank
    ) = 1
)"""
# The names tables: one row per id, as `projects` (the dataset that listed it last); a versions
# table keeps the history of that same dataset (numbered within it, like operation_versions).
_NAMES_OWNER = """(SELECT id, _rank FROM ({union})
QUALIFY row_number() OVER (PARTITION BY id ORDER BY last_seen_at DESC NULLS LAST, _rank) = 1)"""
_UNION_VIEW = """CREATE OR REPLACE VIEW {name} AS
SELECT v.* EXCLUDE (_rank) FROM ({union}) AS v
SEMI JOIN {owner} AS o ON v.id = o.id AND v._rank = o._rank;
"""


def _names_union_view(table: Any, labels: Sequence[str]) -> str:
    """The view of one names table over several datasets, one owner per id (`_NAMES_OWNER`)."""
    if not table.versions:
        owner = table.name
    elif table.kind.key == "project":
        owner = "projects"
    else:
        owner = next(t.name for t in NAMES_TABLES if t.kind == table.kind and not t.versions)
    return _UNION_VIEW.format(
        name=table.name,
        union=_union(table.name, labels),
        owner=_NAMES_OWNER.format(union=_union(owner, labels, "id, last_seen_at")),
    )


def _union(view: str, labels: Sequence[str], columns: str = "*") -> str:
    return "\nUNION ALL\n".join(
        f"SELECT {columns}, {_quote(label)} AS dataset, {i} AS _rank FROM d{i}.{view}"
        for i, label in enumerate(labels, 1)
    )


def _load_datasets(
    con: duckdb.DuckDBPyConnection,
    datasets: Sequence[Reader],
    only: Sequence[str] | None,
    names: Collection[str] | None,
) -> None:
    data_dirs = _DATA_DIRS[con]
    if len(datasets) == 1:
        _load(con, _dataset_sources(con, datasets[0], "1"), only, data_dirs, names)
        return
    # Several datasets: the union views below name every base view of each schema.
    labels = [d.label for d in datasets]
    base = sql_files()[0].name
    for i, dataset in enumerate(datasets, 1):
        con.execute(f"CREATE SCHEMA d{i}")
        con.execute(f"SET schema = 'd{i}'")
        _load(con, _dataset_sources(con, dataset, str(i)), [base], data_dirs)
    con.execute("SET schema = 'main'")
    # The files load over placeholders of the right shape; the base views are then replaced.
    placeholder = {source: f"(SELECT * FROM d1.{view})" for source, view in BASE_VIEWS.items()}
    placeholder[SUPERSEDED_GLOB] = _DERIVED_SUPERSEDED
    placeholder[SUMMARY_GLOB] = ""  # no record across datasets: the report reads the rows
    placeholder[FLAGGED_GLOB] = ""
    _load(con, placeholder, only, data_dirs)
    con.execute(
        _UNION_VIEWS.format(
            owner=_OWNER.format(latest=_union("operations", labels, "id, updated_at, observed_at")),
            stored=_union("stored_operation_versions", labels),
            versions=_union("operation_versions", labels),
            projects=_union("projects", labels),
            sync_runs=_union("sync_runs", labels),
        )
        + "".join(_names_union_view(t, labels) for t in NAMES_TABLES)
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _whole(exc: BaseException) -> str:
    """DuckDB's whole message: its `Did you mean "operations"?`, the LINE and caret lines
    and the candidate bindings say what to fix (only trailing blanks are dropped)."""
    lines = [line.rstrip() for line in str(exc).strip("\n").splitlines()]
    return "\n".join(lines) if any(lines) else type(exc).__name__


def memory_connection() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB database: what `connect` defines the views in, and what
    `check_read_only` can parse with (DuckDB's module-level parser functions open a second
    database, the default connection, ~12 ms of `opsaudit query` start-up)."""
    return duckdb.connect(":memory:")


def connect(
    data_dir: os.PathLike[str] | str | Iterable[os.PathLike[str] | str],
    *,
    storage_options: Iterable[str] = (),
    only: Sequence[str] | None = None,
    safe: bool = False,
    con: duckdb.DuckDBPyConnection | None = None,
    names: Collection[str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with every view over `data_dir` defined.

    `data_dir` is a local directory, an object-storage URL (s3://bucket/prefix, gs://, az://:
    the Delta tables' current snapshots, read through Arrow; `storage_options` as for
    `--storage-option`), or a list of those read together: then `operation_versions`,
    `projects` and `sync_runs` gain a `dataset` column (the data dir as given) and
    `operations` holds each operation once, as most recently observed by any of them.

    The views read what was committed when connecting (a snapshot: connect again to see later
    syncs); a source that had no file at all stays empty for this connection.
    `only` names the .sql files to load (e.g. the report's): each view costs a bind, which
    reads Parquet metadata, so a command that needs three views need not define thirty.
    `safe` (what `opsaudit query` and `report` use) limits file access to the datasets' local
    directories, turns off extension installs and loads, and locks the configuration so no
    statement undoes it.
    `con`: a fresh connection of `memory_connection()` to define the views in (the one
    `check_read_only` parsed the query with: a second DuckDB instance costs ~12 ms of start-up);
    it is closed if this raises. `names`: of those files only these views and macros
    (`sql_names_for`; one dataset only: several are joined by every base view).
    """
    try:
        # None: "'NoneType' object is not iterable"
        expected = f"{DATA_DIR_EXPECTED}; or a list of those"
        # Any iterable of them (a set, a generator: the datasets are read together, in no
        # order); not text: a str is one directory, not a sequence of characters.
        check_type(
            "data_dir", data_dir, (str, os.PathLike, Iterable), expected, but=(bytes, bytearray)
        )
        listed = [data_dir] if isinstance(data_dir, (str, os.PathLike)) else list(data_dir)
        given = [plain_path(d) for d in listed]
        datasets = open_readers(given, storage_options)
    except BaseException:
        if con is not None:
            con.close()
        raise
    if con is None:
        con = memory_connection()
    try:
        # UTC everywhere: created_at::DATE must be the same day as the created_date partition
        # (opsaudit.duckdb's readers keep their own zone: sql/ counts ages in UTC, utc_age).
        con.execute("SET TimeZone = 'UTC'")
        # Binding each view reads the first file's footer; cache footers across binds/queries.
        con.execute("SET parquet_metadata_cache = true")
        _DATA_DIRS[con] = [d.root for d in datasets if isinstance(d, LocalReader)]
        _load_datasets(con, datasets, only, names)
        if safe:
            _lock_down(con, datasets)
    except BaseException:
        con.close()
        raise
    return con


def _lock_down(con: duckdb.DuckDBPyConnection, datasets: Sequence[Reader]) -> None:
    """Only the datasets' files can be read from now on, and no setting can be changed (issue 15).

    The views read Parquet under each local data directory when queried, so those stay allowed
    (object-storage snapshots are read through Arrow, not DuckDB's file system);
    `read_csv('/etc/passwd')`, a URL or `ATTACH` elsewhere fail with a permission error.
    Writes into a data directory are kept out by `check_read_only`, not by DuckDB.
    """
    directories: list[Path] = []
    files: list[Path] = []
    for dataset in datasets:
        more_dirs, more_files = dataset.readable_paths()
        directories += more_dirs
        files += more_files
    allowed = ", ".join(_quote(d.as_posix().rstrip("/") + "/") for d in directories)
    allowed_files = ", ".join(_quote(f.as_posix()) for f in files)
    for statement in (
        # DuckDB allows its temporary directory ($PWD/.tmp by default) besides the listed ones
        # (issue 19): without a temporary directory nothing outside the datasets is readable;
        # a query then holds its working set in memory (no spilling to disk).
        "SET temp_directory = ''",
        f"SET allowed_directories = [{allowed}]",
        f"SET allowed_paths = [{allowed_files}]",
        "SET enable_external_access = false",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        "SET lock_configuration = true",
    ):
        con.execute(statement)


def execute(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any] | dict[str, Any] | None = None,
) -> tuple[list[str], list[tuple[Any, ...]]]:
    """Run one query (`params`: values of its `?` or `$name` placeholders); its column names and
    rows. DuckDB errors become `QueryError` with DuckDB's whole message; Ctrl-C stops it."""
    return _interruptible(con, lambda: _execute(con, sql, params))


# Rows of one batch of `execute_batches`: DuckDB's vector, ~2 MB of Python tuples for
# `operation_versions` (3M rows as jsonl: 169 MiB peak at 2048, 187 at 4096, 252 at 10,000).
BATCH_ROWS = 2048


def execute_batches(
    con: duckdb.DuckDBPyConnection,
    sql: str,
    params: Sequence[Any] | dict[str, Any] | None = None,
    *,
    size: int | None = None,
) -> tuple[list[str], Iterator[list[tuple[Any, ...]]]]:
    """`execute`, its rows in batches of at most `size` (default BATCH_ROWS, none empty) as
    DuckDB produces them: memory bounded by a batch, not the result. Binding fails here;
    reading goes on as batches are taken, so an error while reading (a file a sync deleted
    meanwhile: `is_file_gone`) is raised by the iterator, as `QueryError`. The connection must
    stay open until it ends."""
    cursor, columns, types = _interruptible(con, lambda: _start(con, sql, params))
    per_batch = size or BATCH_ROWS  # (read now: a test makes batches small)

    def batches() -> Iterator[list[tuple[Any, ...]]]:
        if cursor is None:
            return
        while rows := _interruptible(con, lambda: _fetch(con, lambda: cursor.fetchmany(per_batch))):
            yield _typed(rows, types)

    return columns, batches()


def _start(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | dict[str, Any] | None
) -> tuple[Any, list[str], list[str]]:
    """The query's cursor (None: a statement with no result, SET, CREATE, ...), column names
    and types; its rows not fetched yet (DuckDB streams them)."""
    try:
        cursor = con.execute(sql, params) if params is not None else con.execute(sql)
    except duckdb.Error as exc:
        raise _query_error(exc, _whole(exc), _DATA_DIRS.get(con, [])) from exc
    if cursor.description is None:
        return None, [], []
    return cursor, [d[0] for d in cursor.description], [str(d[1]) for d in cursor.description]


def _fetch(con: duckdb.DuckDBPyConnection, fetch: Callable[[], _T]) -> _T:
    try:
        return fetch()
    except duckdb.Error as exc:
        raise _query_error(exc, _whole(exc), _DATA_DIRS.get(con, [])) from exc


_T = TypeVar("_T")


def _interruptible(con: duckdb.DuckDBPyConnection, run: Callable[[], _T]) -> _T:
    """`run()` in a worker thread, so that Ctrl-C stops it at once (`con.interrupt()`): DuckDB
    looks for a signal only while the main thread works on the query itself, which with more
    than one thread it mostly does not (the query ran on to its end). Off the main thread (a
    notebook's worker, the report's sections), `run()` as it is."""
    if threading.current_thread() is not threading.main_thread():
        return run()
    done: list[_T] = []
    failed: list[BaseException] = []
    # An Event, not Thread.join: a join interrupted by Ctrl-C may take the thread for ended
    # while it runs on (CPython 3.11), and the connection is then still busy with its query.
    ended = threading.Event()

    def work() -> None:
        try:
            done.append(run())
        except BaseException as exc:  # handed to the main thread, as raised
            failed.append(exc)
        finally:
            ended.set()

    threading.Thread(target=work, name="opsaudit-query", daemon=True).start()
    try:
        ended.wait()
    except KeyboardInterrupt:
        while True:  # (a second Ctrl-C while the query stops: the connection is still busy)
            con.interrupt()
            try:
                ended.wait()
                break
            except KeyboardInterrupt:
                continue
        raise
    if failed:
        raise failed[0]
    return done[0]


def _execute(
    con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | dict[str, Any] | None
) -> tuple[list[str], list[tuple[Any, ...]]]:
    cursor, columns, types = _start(con, sql, params)
    if cursor is None:  # a statement with no result (SET, CREATE, ...)
        return [], []
    return columns, _typed(_fetch(con, cursor.fetchall), types)


def _typed(rows: list[tuple[Any, ...]], types: list[str]) -> list[tuple[Any, ...]]:
    """Rows as the driver fetched them, JSON values marked and TIMESTAMPTZ infinities named."""
    if _JSON in types or f"{_JSON}[]" in types:
        rows = _json_values(rows, types)
    zoned = [i for i, t in enumerate(types) if t == _TIMESTAMPTZ]
    return _infinities(rows, zoned) if zoned else rows


_JSON = "JSON"


def _json_values(rows: list[tuple[Any, ...]], types: list[str]) -> list[tuple[Any, ...]]:
    """The values of JSON columns (and lists of them) marked as JSON: the driver hands them
    over as their text, which JSON output then wrote as a string holding JSON."""
    marks = {i: t == _JSON for i, t in enumerate(types) if t in (_JSON, f"{_JSON}[]")}

    def mark(value: Any, whole: bool) -> Any:
        if value is None:
            return None
        if whole:
            return JsonText(value)
        return [None if v is None else JsonText(v) for v in value]

    return [
        tuple(mark(v, marks[i]) if i in marks else v for i, v in enumerate(row)) for row in rows
    ]


_TIMESTAMPTZ = "TIMESTAMP WITH TIME ZONE"
_INFINITY = {datetime.max: "infinity", datetime.min: "-infinity"}


def _infinities(rows: list[tuple[Any, ...]], zoned: list[int]) -> list[tuple[Any, ...]]:
    """A TIMESTAMPTZ infinity as DuckDB spells it: the driver hands it over as a naive
    datetime.max/min (the finite extremes keep their zone), printed as an instant it is not."""
    for k, row in enumerate(rows):
        if any(isinstance(row[i], datetime) and row[i].tzinfo is None for i in zoned):
            fixed = list(row)
            for i in zoned:  # a zoned value or None is no key: left as it is
                fixed[i] = _INFINITY.get(fixed[i], fixed[i])
            rows[k] = tuple(fixed)
    return rows


def is_missing_definition(exc: QueryError) -> bool:
    """True when `execute` failed on a name the catalog does not hold (a view or macro not
    defined on this connection, or no such name at all)."""
    return isinstance(exc.__cause__, duckdb.CatalogException)


# What DuckDB says when a file a view names is not there (a list of files, then a single one).
_GONE = ("No files found that match the pattern", "No such file or directory")


def is_file_gone(exc: QueryError) -> bool:
    """True when `execute` failed because a file the views name is no longer there: a sync that
    ended since they were defined replaced it (a compaction, a month's merge) and deleted it
    once `opsaudit.duckdb` named the replacement. Views defined now name what replaced it."""
    cause = exc.__cause__
    return isinstance(cause, duckdb.IOException) and any(text in str(cause) for text in _GONE)


# Which statements `opsaudit query` runs (issue 15): reading ones only, decided by DuckDB's own
# parser. SELECT covers WITH, VALUES, FROM-first, DESCRIBE, SHOW, SUMMARIZE and PIVOT ... IN (...).
# A PRAGMA or CALL may write (`IMPORT DATABASE` and `COPY FROM DATABASE` parse as PRAGMA, `CHECKPOINT`
# as CALL), so only these introspection pragmas pass, as `PRAGMA name` or `CALL pragma_name(...)`.
READ_ONLY_PRAGMAS = frozenset(
    {
        "collations",
        "database_list",
        "database_size",
        "functions",
        "platform",
        "show",
        "show_databases",
        "show_tables",
        "show_tables_expanded",
        "storage_info",
        "table_info",
        "user_agent",
        "version",
    }
)
# A PIVOT without an IN list parses as a MULTI statement (an enum, then the query); a MULTI of
# another kind can be `CREATE TABLE ... AS PIVOT`, so only one that starts with PIVOT passes.
_PIVOTS = frozenset({"pivot", "pivot_wider"})
_HOW_TO_WRITE = (
    'to save rows use `opsaudit query --format csv -o FILE "SELECT ..."`; for anything else '
    "open <data-dir>/opsaudit.duckdb with the DuckDB CLI"
)


def _words(text: str) -> list[tuple[int, str]]:
    """(position, lower-case text) of each token but comments, by DuckDB's own tokenizer."""
    tokens = duckdb.tokenize(text)
    ends = [pos for pos, _ in tokens[1:]] + [len(text)]
    return [
        (pos, text[pos:end].strip().lower())
        for (pos, kind), end in zip(tokens, ends)
        if kind != duckdb.token_type.comment
    ]


def _refused(kind: str) -> ReadOnlyError:
    return ReadOnlyError(
        f"opsaudit query only reads: {kind} statements are refused; {_HOW_TO_WRITE}"
    )


def _parse(sql: str, con: duckdb.DuckDBPyConnection | None) -> list[duckdb.Statement]:
    try:
        return _extract_statements(sql, con)
    except duckdb.Error as exc:
        raise QueryError(_whole(exc)) from exc


def _extract_statements(sql: str, con: duckdb.DuckDBPyConnection | None) -> list[duckdb.Statement]:
    # duckdb.extract_statements parses with DuckDB's default connection: a second database.
    return con.extract_statements(sql) if con is not None else duckdb.extract_statements(sql)


def _check_explained(text: str, con: duckdb.DuckDBPyConnection | None) -> None:
    """EXPLAIN ANALYZE runs its statement, so the statement explained must be a reading one."""
    words = _words(text)
    rest = 1 + (len(words) > 1 and words[1][1] in ("analyze", "analyse"))
    if rest >= len(words):
        raise _refused("EXPLAIN")
    inner = text[words[rest][0] :]
    try:
        statements = _extract_statements(inner, con)
    except duckdb.Error:
        statements = []
    if not statements and words[rest][1] == "(":
        # EXPLAIN (FORMAT json) SELECT ...: skip the options in parentheses.
        depth = 0
        for pos, word in words[rest:]:
            depth += (word == "(") - (word == ")")
            if depth == 0:
                inner = text[pos + 1 :]
                break
        statements = _parse(inner, con)
    if len(statements) != 1:
        raise _refused("EXPLAIN")
    _check_statement(statements[0], con)


def _check_statement(statement: duckdb.Statement, con: duckdb.DuckDBPyConnection | None) -> None:
    words = _words(statement.query)
    first = words[0][1] if words else ""
    name = words[1][1] if len(words) > 1 else ""
    try:
        kind = statement.type
    except ValueError as exc:
        # A statement type newer than the Python binding's enum (e.g. UPDATE EXTENSIONS).
        raise _refused(" ".join(w for _, w in words[:2]).upper() or "unknown") from exc
    if kind == duckdb.StatementType.SELECT:
        return None
    if kind == duckdb.StatementType.EXPLAIN:
        return _check_explained(statement.query, con)
    if kind == duckdb.StatementType.PRAGMA and first == "pragma" and name in READ_ONLY_PRAGMAS:
        return None
    if (
        kind == duckdb.StatementType.CALL
        and first == "call"
        and name.startswith("pragma_")
        and name.removeprefix("pragma_") in READ_ONLY_PRAGMAS
    ):
        return None
    if kind == duckdb.StatementType.MULTI and first in _PIVOTS:
        return None
    label = kind.name
    if first and first.upper() != label:
        label = f"{label} ({first.upper()})"  # e.g. LOAD (INSTALL), PRAGMA (IMPORT), SET (USE)
    raise _refused(label)


def check_read_only(
    sql: str, *, single: bool = False, con: duckdb.DuckDBPyConnection | None = None
) -> None:
    """Raise `ReadOnlyError` unless every statement of `sql` only reads; nothing is run.

    No statement at all (empty text, only comments or semicolons) is a usage error
    (`ConfigError`, exit 2). `single`: more than one statement is one too (`opsaudit query`
    prints one result: running them all and showing the last would hide the others).

    Reading: SELECT (with WITH, VALUES, DESCRIBE, SHOW, SUMMARIZE, PIVOT), EXPLAIN of a reading
    statement, and the introspection pragmas of `READ_ONLY_PRAGMAS`. Everything else (COPY,
    CREATE, INSERT, UPDATE, DELETE, DROP, ALTER, ATTACH, DETACH, INSTALL, LOAD, SET, EXPORT,
    IMPORT, CALL of other functions, transactions, ...) is refused. Malformed SQL raises
    `QueryError` with DuckDB's message. `con`: the connection to parse with (none: DuckDB's
    default connection, a database of its own).
    """
    check_type("sql", sql, str, "a str of SQL")  # None: a TypeError from DuckDB's parser
    statements = _parse(sql, con)
    if not statements:
        raise ConfigError("no SQL statement given (the text is empty or only comments)")
    for statement in statements:
        _check_statement(statement, con)
    if single and len(statements) > 1:
        raise ConfigError(
            f"{len(statements)} SQL statements given; opsaudit query runs one per call "
            "(run each on its own, or combine them with UNION ALL or WITH)"
        )


def _held_by_another_connection(path: Path) -> bool:
    """True if a connection (of another process, or this one) has `path` open in DuckDB."""
    try:
        # A read-only open takes a shared lock and fails at once (never waits) when a writer
        # holds the exclusive one; in this process DuckDB refuses a second open of the same
        # file with a different mode.
        probe = duckdb.connect(str(path), read_only=True)
    except duckdb.Error as exc:
        message = str(exc).lower()
        return "lock" in message or "different configuration" in message
    probe.close()
    # A read-only holder shares the probe's lock: a rename would leave it its copy, but the
    # compaction inputs that copy names are deleted next (its queries then fail).
    return _locked(path)


def _locked(path: Path) -> bool:
    """Whether any process (this one too) holds a lock on `path`: DuckDB locks the whole file,
    shared when read-only (Linux's /proc/locks; elsewhere False). Read, not probed with a lock
    of our own: closing a descriptor of the file drops every lock this process has on it."""
    try:
        st = path.stat()
        locks = Path("/proc/locks").read_text()
    except OSError:
        return False
    inode = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
    return any(inode in line.split() for line in locks.splitlines())


# The DuckDB storage format of `opsaudit.duckdb`: the oldest DuckDB CLI release on PyPI
# (duckdb-cli 1.4.4) must open it, whatever newer duckdb pip resolved for the Python package
# (duckdb 2.0 writes a format the 1.5 CLIs cannot read; issue 23).
VIEWS_DB_STORAGE_VERSION = "v1.4.0"


def source_definitions() -> frozenset[str]:
    """The definitions of the .sql files that name a source's files (a `read_parquet` of a path
    of `SOURCES`, or the summary's total the loader names): all of `opsaudit.duckdb` that
    changes when only the committed files did."""
    return frozenset(
        name
        for path in sql_files()
        for name, text in _definitions(path)
        if name is not None and any(m["path"] in SOURCES for m in _READ_PARQUET.finditer(text))
    ) | {"report_summary_total"}


def write_views_database(data_dir: Path, files_only: bool = False) -> Path | None:
    """Create or refresh `<data_dir>/opsaudit.duckdb` (views only), atomically.

    Its views name the files relative to the data directory, as the .sql files do: the file
    keeps working after the directory is copied, moved or restored, opened from it
    (`cd <data-dir> && duckdb opsaudit.duckdb`). Written in the storage format of
    `VIEWS_DB_STORAGE_VERSION` so the DuckDB CLI releases users have can open it.

    `files_only`: the caller knows the file was written from the same .sql files and code, for
    the same directory and the same sources with and without files (`analytics.views_db`): a
    copy of it gets only the `source_definitions()` again, with the files committed now. The
    others are kept as they were: a view is bound again when it is queried, and what they read
    has the same columns. Creating them is most of the writing (~0.1 s of CPU, issue 24).
    Without a file to copy (or with a WAL beside it) the whole file is written.

    Returns the path, or None when a program holds the file open for writing (a DuckDB shell,
    a notebook): the sync must never wait for a reader, and the next sync refreshes the file.
    """
    data_dir = Path(data_dir).resolve()
    target = data_dir / VIEWS_DB
    # The summary's total first (the report reads it even while this file is held open); the
    # views name it (`local_sources`) once it is there.
    try:
        total = write_summary_total(data_dir)
    except (duckdb.Error, OSError) as exc:  # the report reads the months, as before it
        log.warning("could not write the summary's total: %s", _first_line(exc))
        total = None
    if target.exists() and _held_by_another_connection(target):
        return None
    # What a writer killed before its rename left (its file and WAL, `_write_views`): one
    # writer at a time (the dataset's lock), so any here is stale; killed runs would pile
    # them up.
    for stale in data_dir.glob(f".{VIEWS_DB}.*.tmp*"):
        stale.unlink(missing_ok=True)
    # A WAL left by a crashed writer of the old file: its copy would lack what the WAL holds.
    written = False
    if files_only and target.is_file() and not Path(f"{target}.wal").exists():
        try:
            _write_views(data_dir, target, files_only=True)
            written = True
        except (duckdb.Error, QueryError, OSError) as exc:  # not a file DuckDB opens (any more)
            log.debug("opsaudit.duckdb written whole: %s", _first_line(exc))
    if not written:
        _write_views(data_dir, target, files_only=False)
    if total is not None:  # no older total is named here any more
        delete_older_totals(total)
    return target


def _write_views(data_dir: Path, target: Path, files_only: bool) -> None:
    tmp = data_dir / f".{VIEWS_DB}.{uuid.uuid4().hex[:12]}.tmp"
    try:
        with readable_dir(data_dir) as seen:
            # Built where DuckDB reads its path as one (a `?` in it starts ATTACH's options,
            # through a symlink too), then copied in: beside the alias of a directory it
            # would not.
            build = tmp if seen == data_dir else seen.parent / tmp.name
            if files_only:
                shutil.copyfile(target, build)  # keeps the storage format it was written in
            con = duckdb.connect(":memory:")
            try:
                storage = (
                    "" if files_only else f" (STORAGE_VERSION {_quote(VIEWS_DB_STORAGE_VERSION)})"
                )
                con.execute(f"ATTACH {_quote(str(build))} AS views_db{storage}")
                con.execute("USE views_db")
                # Creating a view binds it: its relative paths must resolve here as they will
                # for a user in the data directory.
                con.execute(f"SET file_search_path = {_quote(seen.as_posix())}")
                sources = _derive_missing(local_sources(data_dir, relative=True))
                _load(con, sources, None, [data_dir], source_definitions() if files_only else None)
                con.execute("USE memory")
                con.execute("CHECKPOINT views_db")
                con.execute("DETACH views_db")
            finally:
                con.close()
            if build != tmp:
                with open(build, "rb") as source, open(tmp, "wb") as copy:
                    shutil.copyfileobj(source, copy)
                    copy.flush()
                    os.fsync(copy.fileno())  # as DuckDB's checkpoint syncs its own
        # A WAL left by a crashed writer of the old file would be replayed against the new one.
        Path(f"{target}.wal").unlink(missing_ok=True)
        os.replace(tmp, target)
        # The rename made durable before the caller records what the file names (and then
        # deletes the files it no longer names): power loss must not bring back the old one.
        fsync_dir(data_dir)
    finally:
        tmp.unlink(missing_ok=True)
        Path(f"{tmp}.wal").unlink(missing_ok=True)
    log.debug(
        "opsaudit.duckdb written (%s)", "the definitions naming files" if files_only else "whole"
    )


def _views_database_main(argv: Sequence[str]) -> int:
    """`python -m exporter.analytics.views DATA_DIR [--files-only]`: what the sync runs in a short
    child process, so that DuckDB is never loaded into the sync (its peak memory, PRODUCT.md
    performance targets). Exit 0: written; 3: held open by another program; 1: failed (the
    reason on stderr)."""
    import sys

    try:
        written = write_views_database(Path(argv[0]), files_only="--files-only" in argv[1:])
    except Exception as exc:
        from exporter.analytics.views_failure import failure

        print(failure(Path(argv[0]).resolve(), exc), file=sys.stderr)
        return 1
    return 0 if written is not None else 3


if __name__ == "__main__":
    import sys

    sys.exit(_views_database_main(sys.argv[1:]))
