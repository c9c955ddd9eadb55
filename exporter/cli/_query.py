"""`opsaudit query` and `opsaudit report`: SQL over the dataset's views, and the headline report."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from exporter.analytics.format import FORMATS, SECTIONS, STREAMED
from exporter.cli._common import (
    Identifier,
    data_dirs_option,
    emit,
    output_options,
    storage_option_option,
)
from exporter.cli._group import short_help
from exporter.core.errors import IncompleteOutputError, QueryError

T = TypeVar("T")


@contextlib.contextmanager
def _open(
    data_dirs: Sequence[Path | str],
    storage_options: Sequence[str],
    only: tuple[str, ...] | None = None,
    fresh: Any = None,
    names: frozenset[str] | None = None,
) -> Iterator[Any]:
    # Imported here: DuckDB is not needed by `opsaudit sync --help` and friends.
    from exporter.analytics.views import connect

    # A mistyped path would otherwise answer every query with 0 rows: exit 2 (in `connect`).
    # On object storage the views read the Delta tables' current snapshots (no state needed).
    # Read-only: the connection reads only the datasets and cannot change its settings.
    # `fresh`: the new connection the query was parsed with, to define the views in.
    con = connect(
        data_dirs, storage_options=storage_options, only=only, safe=True, con=fresh, names=names
    )
    try:
        yield con
    finally:
        con.close()


# Connections one command makes at most when a sync deletes files under it (`_read`).
_READS = 3


def _read(
    data_dirs: Sequence[Path | str],
    storage_options: Sequence[str],
    run: Callable[[Any], T],
    only: tuple[str, ...] | None = None,
    fresh: Any = None,
    names: frozenset[str] | None = None,
    rewind: Callable[[], bool] | None = None,
) -> T:
    """`run(con)` on a connection to the datasets (as `_open` makes); again on a new one when
    a file the connection named was deleted meanwhile: a sync that ended while the command ran
    replaced it and deleted it (`views.is_file_gone`). `run` reads and returns; what it wrote
    as it read (`opsaudit query`'s rows as they come) is taken back by `rewind()` first, so a
    run again says nothing twice: where that cannot be (rows on stdout already), it stops with
    `IncompleteOutputError` (exit 9). A file gone for another reason (removed by hand) fails
    the same way each time: its error after `_READS` connections."""
    from exporter.analytics.views import is_file_gone

    reads = 1
    while True:
        try:
            with _open(data_dirs, storage_options, only, fresh, names) as con:
                return run(con)
        except QueryError as exc:
            if reads == _READS or not is_file_gone(exc):
                raise
            if rewind is not None and not rewind():
                raise _cut_short(exc) from exc
        reads += 1
        fresh = None  # closed with the connection it held the views of


def _cut_short(exc: QueryError) -> IncompleteOutputError:
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return IncompleteOutputError(
        "the output is incomplete: a file the query read was deleted after rows had been "
        f"written (a sync's compaction replaced it, or it was removed by hand): {first}; run "
        "the query again, or write it with -o FILE, which reads again when that happens"
    )


def _sql_text(sql: str | None, sql_file: IO[str] | None) -> str:
    """The SQL of `opsaudit query`: the argument, `-` (stdin) or `-f FILE` (exactly one)."""
    if sql is not None and sql_file is not None:
        raise click.UsageError("give the SQL as an argument or with -f FILE, not both")
    if sql == "-" or (sql_file is not None and sql_file.name in ("-", "<stdin>")):
        source = "stdin"
    else:
        source = "the SQL argument" if sql_file is None else f"-f {sql_file.name}"
    try:
        if sql == "-":
            return click.open_file("-", encoding="utf-8").read()
        if sql_file is not None:
            return sql_file.read()
        if sql is not None:
            sql.encode("utf-8")  # argv's bytes that are not UTF-8 arrive as surrogates (PEP 383)
            return sql
    except UnicodeError:
        raise click.UsageError(f"{source} is not UTF-8 text: save the SQL as UTF-8") from None
    raise click.UsageError('no SQL given: opsaudit query "SELECT ...", -f FILE or - (stdin)')


def _params(values: Sequence[str]) -> dict[str, str] | None:
    params: dict[str, str] = {}
    for value in values:
        name, sep, text = value.partition("=")
        if not sep or not name.strip():
            raise click.BadParameter(f"{value!r} is not NAME=VALUE", param_hint="'--param'")
        params[name.strip()] = text
    return params or None


@click.command("query", short_help=short_help("query"))
@output_options(
    list(FORMATS),
    help="json is one array of row objects, jsonl one object per line; timestamps ISO 8601 UTC.",
)
@click.option(
    "-f",
    "--file",
    "sql_file",
    type=click.File("r", encoding="utf-8"),
    default=None,
    metavar="FILE",
    help="Read the SQL from FILE (- for stdin).",
)
@click.option(
    "--param",
    "-p",
    "params",
    multiple=True,
    metavar="NAME=VALUE",
    help="Bind $NAME in the SQL to VALUE (a string DuckDB casts as needed), repeatable.",
)
@click.option(
    "--max-rows",
    type=click.IntRange(0),
    default=100,  # a screenful or two: a `SELECT *` of the whole history is for csv or jsonl
    show_default=True,
    metavar="N",
    help="Rows the table format prints, then how many more, counted as they are read (0: all, "
    "held in memory, as markdown's); the other formats print every row.",
)
@data_dirs_option
@storage_option_option
@click.argument("sql", required=False)
def query_command(
    fmt: str,
    output: Path | None,
    sql_file: IO[str] | None,
    params: tuple[str, ...],
    max_rows: int,
    data_dirs: tuple[Path | str, ...],
    storage_options: tuple[str, ...],
    sql: str | None,
) -> None:
    """Run one SQL statement over the views (operations, ...).

    The SQL is the argument, - (read from stdin) or -f FILE. One statement per call: several
    are refused (exit 2), as is an empty one. Read-only: SELECT, WITH, VALUES, DESCRIBE, SHOW,
    SUMMARIZE, EXPLAIN and table-info pragmas run; COPY, CREATE, SET, ATTACH, INSTALL and other
    writing statements exit 2. Only the dataset's files can be read. Save rows with --format
    csv -o FILE; for anything else use the DuckDB CLI on the data directory's opsaudit.duckdb.

    json, jsonl and csv are written as the rows are read (memory holds a batch); a file deleted
    under the query once rows were printed (a sync's compaction) exits 9, the output incomplete:
    -o FILE reads again instead, and replaces FILE only once every row is written.
    """
    from exporter.analytics.views import (
        check_read_only,
        memory_connection,
        sql_files_for,
        sql_names_for,
    )

    text = _sql_text(sql, sql_file)
    bound = _params(params)
    # One DuckDB database parses the query and then holds the views: DuckDB's module-level
    # parser would open a second one (~12 ms of start-up, PRODUCT.md performance targets).
    fresh = memory_connection()
    try:
        # Before anything runs: COPY, CREATE, SET, ..., no statement or several exit 2.
        check_read_only(text, single=True, con=fresh)
        # The views and macros the query names (and theirs), not all of them.
        only = sql_files_for(text)
        names = sql_names_for(text)
    except BaseException:
        fresh.close()
        raise
    files = tuple(only) if only is not None else None

    def read(run: Callable[[Any], T], rewind: Callable[[], bool] | None = None) -> T:
        return _query(data_dirs, storage_options, run, files, fresh, names, rewind)

    if fmt in STREAMED:
        from exporter.cli._rows import write_rows

        write_rows(output, read, text, bound, fmt)
        return
    from exporter.analytics.format import render

    columns, rows, total = read(_shown(text, bound, fmt, max_rows))
    emit(render(columns, rows, fmt, max_rows=max_rows or None, total=total), output)


def _query(
    data_dirs: Sequence[Path | str],
    storage_options: Sequence[str],
    run: Callable[[Any], T],
    files: tuple[str, ...] | None,
    fresh: Any,
    names: frozenset[str] | None,
    rewind: Callable[[], bool] | None = None,
) -> T:
    """`_read` over the views the query names, then over all of them when it names one those
    do not define."""
    from exporter.analytics.views import is_missing_definition

    try:
        return _read(data_dirs, storage_options, run, files, fresh, names, rewind)
    except QueryError as exc:
        if names is None or not is_missing_definition(exc):
            raise
        if rewind is not None and not rewind():  # (bound when it failed: nothing written)
            raise
    # A name the query builds at run time, or a typo: over every view the query runs, or
    # fails with DuckDB's own "Did you mean" among all of them.
    return _read(data_dirs, storage_options, run, rewind=rewind)


def _shown(
    text: str, bound: Any, fmt: str, max_rows: int
) -> Callable[[Any], tuple[list[str], list[tuple[Any, ...]], int]]:
    """table and markdown: every row first (column widths); the table with --max-rows N keeps
    N of them and counts the others as they are read, so memory holds N rows and a batch."""

    def run(con: Any) -> tuple[list[str], list[tuple[Any, ...]], int]:
        from exporter.analytics.views import execute_batches

        keep = max_rows if fmt == "table" and max_rows else None
        columns, batches = execute_batches(con, text, bound)
        rows: list[tuple[Any, ...]] = []
        total = 0
        for batch in batches:
            total += len(batch)
            rows.extend(batch if keep is None else batch[: max(0, keep - len(rows))])
        return columns, rows, total

    return run


@click.command("report", short_help=short_help("report"))
@click.option(
    "--since",
    default=None,
    metavar="7d|24h|DATE",
    help="Operations created at or after this: a duration back from now (7d, 24h, 30m) or a "
    "date / RFC 3339 time (UTC).  [default: all]",
)
@click.option(
    "--until",
    default=None,
    metavar="DATE",
    help="Operations created up to this date, that whole day included (UTC), or before this "
    "RFC 3339 time / duration back from now.  [default: now]",
)
@click.option(
    "--project",
    "projects",
    type=Identifier(),
    multiple=True,
    metavar="ID",
    help="Only this project (repeatable).",
)
@output_options(
    ["table", "json", "csv", "markdown", "html"],
    help="json is one object with keys freshness, headline, failing_operations, "
    "stuck_operations, errors, projects_failures, branches_failures, branch_failures, failures, "
    "durations and action_mix; html is "
    "one self-contained page with charts (write it with -o FILE).",
)
@click.option(
    "--top",
    type=click.IntRange(1),
    default=10,
    show_default=True,
    metavar="N",
    help="Rows per table in the table format (json, csv and markdown keep every row).",
)
@click.option("--all", "all_rows", is_flag=True, help="Every row in the table format too.")
@click.option(
    "--section",
    type=click.Choice(SECTIONS),
    default=None,
    help="With --format csv: only this table, with its own columns (default: every table in "
    "one, a section column first; the first row, freshness, says how fresh the data is).",
)
@data_dirs_option
@storage_option_option
def report_command(
    since: str | None,
    until: str | None,
    projects: tuple[str, ...],
    fmt: str,
    output: Path | None,
    top: int,
    all_rows: bool,
    section: str | None,
    data_dirs: tuple[Path | str, ...],
    storage_options: tuple[str, ...],
) -> None:
    """What is failing or stuck now, and failure and duration trends.

    A headline block first (how fresh the data is: the last successful sync and its lag;
    operations and period, failure rate, failing now, stuck (still running or waiting, failing
    ones counted once), the actions with the most failures, the branches they came from by name,
    the slowest by p90, with its n when small), then the tables: the operations failing now and
    stuck (oldest first, with project, branch, action, error and age), the top error texts,
    failures per project and per branch (by name, deleted ones marked), then failures,
    durations and action mix per action.
    """
    from exporter.analytics.report import REPORT_SQL, build_report, empty_message
    from exporter.analytics.report_figures import report_names
    from exporter.analytics.report_text import render_report, report_json

    if section is not None and fmt != "csv":
        raise click.UsageError("--section goes with --format csv")
    window_since, window_until = _report_window(since, until)

    def run(con: Any) -> tuple[list[str], Any, str | None]:
        unknown = _unknown_projects(con, projects)
        report = build_report(
            con,
            since=window_since,
            until=window_until,
            project_ids=list(projects) or None,
            lists_as_json=fmt == "json",  # the lists written by DuckDB, not built as rows
            top=_shown_rows(fmt, None if all_rows else top),  # only what a table shows
        )
        if fmt != "html":
            return unknown, report, None
        from exporter.analytics.html import render_html

        return unknown, report, render_html(con, report)

    unknown, report, page = _read(data_dirs, storage_options, run, REPORT_SQL, names=report_names())
    for project in unknown:
        click.echo(f"Warning: --project {project} is not in the dataset.", err=True)
    if page is not None:
        _emit_page(page, output)
        return
    if report.operations == 0 and fmt in ("json", "csv"):
        # Table and markdown say it in the report; json and csv stay machine-readable.
        click.echo(empty_message(report), err=True)
    if fmt == "json":  # bytes as orjson writes them (79 MB at 10M operations)
        emit(report_json(report), output)
        return
    emit(render_report(report, fmt, top=None if all_rows else top, section=section), output)


def _emit_page(page: str, output: Path | None) -> None:
    if output is None and sys.stdout.isatty():
        # Five megabytes of HTML on a terminal help nobody: write the file instead.
        output = Path("report.html")
        emit(page, output)
        click.echo(f"Wrote {output.resolve()} (open it in a browser).")
        return
    emit(page, output)


def _shown_rows(fmt: str, top: int | None) -> int | None:
    """How many rows of each list (operations failing and stuck, projects, branches) `fmt`
    shows (None: every row)."""
    if fmt == "html":
        from exporter.analytics.html import TOP_ROWS

        return TOP_ROWS
    return top if fmt == "table" else None


def _report_window(since: str | None, until: str | None) -> tuple[Any, Any]:
    """--since and --until as instants (None: no bound); a usage error if nothing can match."""
    import datetime as dt

    from exporter.analytics.report import parse_since, parse_until

    # One "now" for both: `--since 7d --until 7d` was a window of the microseconds between two.
    now = dt.datetime.now(dt.timezone.utc)
    window_since = parse_since(since, now=now) if since else None
    window_until = parse_until(until, now=now) if until else None
    if window_since is not None and window_until is not None and window_since >= window_until:
        raise click.UsageError(
            f"--since {since} is not before --until {until}: nothing can match (a --until date "
            "includes that day)"
        )
    return window_since, window_until


def _unknown_projects(con: Any, projects: Sequence[str]) -> list[str]:
    """The --project values the dataset has never seen (a typo reports nothing: warned of)."""
    if not projects:
        return []
    from exporter.analytics.views import execute

    _, rows = execute(
        con, "SELECT id FROM projects UNION SELECT DISTINCT project_id FROM operations"
    )
    known = {r[0] for r in rows}
    return [project for project in projects if project not in known]
