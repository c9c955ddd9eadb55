"""`opsaudit demo`: the simulator, a sync, the report and what to try next, with no key."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path

import click

from exporter.cli._common import DataDir, emit, lean_allocators, setup_logging
from exporter.cli._group import short_help
from exporter.cli._progress import Progress
from exporter.demo import DEFAULT_DAYS, DEFAULT_PROJECTS, run_demo

# The query suggested at the end: short, and it shows that the whole history is there.
_EXAMPLE_SQL = "SELECT * FROM failures_by_day ORDER BY failure_rate DESC LIMIT 5"
# ... and one that shows branches by name, not id (issue 21).
_NAMES_SQL = "SELECT branch_name, branch_id, deleted_at, failed FROM failures_by_branch LIMIT 5"


@click.command("demo", short_help=short_help("demo"))
@click.option(
    "--data-dir",
    type=DataDir(urls=False),
    default=None,
    show_default="a new temporary directory, kept",
    help="New or empty directory for the demo dataset.",
)
@click.option(
    "--projects",
    type=click.IntRange(1, 1000),
    default=DEFAULT_PROJECTS,
    show_default=True,
    help="Projects in the simulated account.",
)
@click.option(
    "--days",
    type=click.IntRange(1, 180),
    default=DEFAULT_DAYS,
    show_default=True,
    help="Days of history per project.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress line on stderr (default: when stderr is a terminal).",
)
def demo_command(data_dir: Path | None, projects: int, days: int, progress: bool | None) -> None:
    """Sync a simulated account (no key, no network) and print the report."""
    lean_allocators()  # before pyarrow is imported: the simulator and the sync share this process
    setup_logging("text", 0)
    click.echo(
        f"Simulating an account with {projects} projects and {days} days of history up to now "
        "on 127.0.0.1 (no key, no network), then syncing it ...",
        err=True,
    )
    show = sys.stderr.isatty() if progress is None else progress
    observer = Progress(show)
    try:
        result = run_demo(
            data_dir, observer, projects=projects, days=days, map_large_allocations=True
        )
    finally:
        observer.finish()
    summary = result.summary
    click.echo(summary.line(), err=True)
    if summary.error:
        click.echo(f"Error: {summary.error}", err=True)
    if summary.exit_code != 0:
        sys.exit(int(summary.exit_code))

    click.echo("")
    page = _print_report(result.data_dir)

    # Absolute: jupyter runs the notebook's kernel in notebooks/, where a relative path to the
    # data or the plots points elsewhere.
    data = result.data_dir.absolute()
    plots = Path.cwd() / "plots"
    where = shlex.quote(str(data))
    click.echo("")
    kept = " (a temporary directory, kept for you: delete it when done)" if result.temporary else ""
    click.echo(f"The dataset is in {data}{kept}.")
    click.echo(f"The report with charts (one page, opens offline in a browser): {page}")
    click.echo("Next, try:")
    click.echo(f"  opsaudit query --data-dir {where} {shlex.quote(_EXAMPLE_SQL)}")
    click.echo(
        f"  opsaudit query --data-dir {where} {shlex.quote(_NAMES_SQL)}    # branches by name"
    )
    click.echo(f"  opsaudit report --data-dir {where} --since 7d    # the history ends now")
    click.echo(f"  opsaudit status --data-dir {where}")
    click.echo(
        f"  (cd {shlex.quote(str(result.views_db.parent))} && duckdb {result.views_db.name})"
        "    # the DuckDB CLI: every view is defined there"
    )
    click.echo(
        f"  OPSAUDIT_DATA_DIR={where} OPSAUDIT_NOTEBOOK_OUT={shlex.quote(str(plots))} jupyter "
        "execute notebooks/overview.ipynb    # the overview notebook (a clone with '.[test]'): "
        f"its figures as PNG files in {plots}"
    )


def _print_report(data_dir: Path) -> Path:
    """Print the text report; write the HTML one next to the data and return its path."""
    from exporter.analytics.html import TOP_ROWS as PAGE_ROWS
    from exporter.analytics.html import render_html
    from exporter.analytics.report import build_report
    from exporter.analytics.report_text import TOP_ROWS, render_report
    from exporter.analytics.views import connect

    con = connect(data_dir)
    try:
        report = build_report(con, top=max(TOP_ROWS, PAGE_ROWS))  # what both show
        emit(render_report(report, "table", top=TOP_ROWS) + "\n", None)
        page = data_dir / "report.html"
        page.write_text(render_html(con, report), encoding="utf-8")
    finally:
        con.close()
    return page
