"""`opsaudit sync`, `opsaudit status` and `opsaudit compact`."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import signal
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from exporter.api.pacing import DEFAULT_MAX_RPS
from exporter.cli._common import (
    Identifier,
    api_options,
    data_dir_option,
    echo_error,
    emit,
    env_option,
    lean_allocators,
    output_options,
    read_key,
    require_dataset,
    setup_logging,
    storage_option_option,
)
from exporter.cli._events import events_options
from exporter.cli._group import short_help
from exporter.cli._metrics import metrics_file_option, write_metrics_file
from exporter.cli._ops import Duration, FiniteFloatRange
from exporter.cli._progress import Progress
from exporter.core.errors import ConfigError, ExitCode, OpsauditError, StoppedError
from exporter.engine.settings import MAX_CONCURRENCY, max_requests_problem

if TYPE_CHECKING:
    from exporter.engine.sync import RunSummary
    from exporter.events.outbox import EventsConfig

# The account's budget, shared with the console and every other client (PRODUCT.md).
ACCOUNT_RPS = 700 / 60


def _max_requests(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    """Refused before any request when it cannot cover one page of the projects listing and
    a project's names (the run listed the projects, then refused, recording a failed run)."""
    problem = None if value is None else max_requests_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    return value


@click.command(short_help=short_help("sync"))
@data_dir_option
@storage_option_option
@api_options
@click.option(
    "--project",
    "projects",
    type=Identifier(),
    multiple=True,
    metavar="ID",
    help="Sync only this project (repeatable); no listing needed. With --org-id: this "
    "project besides the organization's.",
)
@click.option(
    "--org-id",
    "org_ids",
    type=Identifier(),
    multiple=True,
    metavar="ID",
    help="List only this organization (repeatable); with --project, its projects besides "
    "those named.",
)
@env_option(
    "--max-rps",
    type=FiniteFloatRange(min=0),
    envvar="OPSAUDIT_MAX_RPS",
    show_envvar=True,
    default=DEFAULT_MAX_RPS,
    show_default=True,
    help="Requests per second for the whole run (0: no pacing). The account allows 700/min.",
)
@click.option(
    "--route-max-rps",
    type=FiniteFloatRange(min=1),
    default=40.0,
    hidden=True,  # the API's 40/s per route; time-scaled benchmarks raise it with the simulator
)
@env_option(
    "--time-budget",
    type=Duration(),
    envvar="OPSAUDIT_TIME_BUDGET",
    show_envvar=True,
    metavar="DURATION",
    help="Stop starting new work after this long (90s, 10m, 1h); what was read is committed "
    "and the next run continues with the stalest projects (outcome 'budget', exit 0).",
)
@env_option(
    "--max-requests",
    type=click.INT,
    callback=_max_requests,
    envvar="OPSAUDIT_MAX_REQUESTS",
    show_envvar=True,
    metavar="N",
    help="Send at most this many requests, retries included; then stop starting new work "
    "(like --time-budget: a retry past it is given up).",
)
@click.option(
    "--skip-idle",
    is_flag=True,
    help="Leave projects whose listing shows no activity (updated_at, compute_last_active_at) "
    "since their last walk; every project is still walked at least every --full-sweep-every. "
    "Can delay operations that leave no trace in the listing (README).",
)
@click.option(
    "--full-sweep-every",
    type=Duration(),
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="With --skip-idle: the longest a project goes without a walk.",
)
@env_option(
    "--refresh-open-every",
    type=Duration(zero=True),
    envvar="OPSAUDIT_REFRESH_OPEN_EVERY",
    show_envvar=True,
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="The longest an open (non-terminal) operation goes without a re-read. Hot ones "
    "(created or changed within the hour, retry_at passed) are re-read in every run, colder "
    "ones when their last read is older than a quarter of the time since they changed. 0: "
    "every open operation in every run (after an exit-0 run, operations equals the API).",
)
@click.option(
    "--clock-offset",
    type=FiniteFloatRange(min=-1e9, max=1e9),  # ~31 years either way: microseconds fit SQLite
    default=0.0,
    hidden=True,  # soaks: the run's clock is the simulator's, which runs ahead of the wall clock
)
@env_option(
    "--names-max-age",
    type=Duration(zero=True),
    envvar="OPSAUDIT_NAMES_MAX_AGE",
    show_envvar=True,
    default="24h",
    show_default=True,
    metavar="DURATION",
    help="Read a project's branches and endpoints listings again (2 requests) once they are "
    "older than this; also in its first walk and when an operation names an unknown id. "
    "0: every run.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, MAX_CONCURRENCY),
    default=4,
    show_default=True,
    help="Projects walked at once.",
)
@click.option(
    "--wait",
    "wait_for_lock",
    is_flag=True,
    help="Wait for a running sync instead of exiting with code 4.",
)
@click.option("--no-compact", is_flag=True, help="Skip compaction at the end of the run.")
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Format of log lines on stderr; json also makes the summary on stdout and the error "
    "lines on stderr one JSON object each.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress line on stderr (default: when stderr is a terminal).",
)
@click.option("-v", "--verbose", count=True, help="More log lines (-vv for debug).")
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="No summary line and no progress (cron mails only when something failed); errors "
    "and warnings are still printed.",
)
@metrics_file_option
@events_options
def sync_command(
    data_dir: Path | str,
    storage_options: tuple[str, ...],
    api_key_file: Path | None,
    base_url: str,
    projects: tuple[str, ...],
    org_ids: tuple[str, ...],
    max_rps: float,
    route_max_rps: float,
    time_budget: dt.timedelta | None,
    max_requests: int | None,
    skip_idle: bool,
    full_sweep_every: dt.timedelta,
    refresh_open_every: dt.timedelta,
    clock_offset: float,
    names_max_age: dt.timedelta,
    concurrency: int,
    wait_for_lock: bool,
    no_compact: bool,
    log_format: str,
    progress: bool | None,
    verbose: int,
    quiet: bool,
    metrics_file: Path | None,
    events: EventsConfig | None,
) -> None:
    """Export every project's new and changed operations to the dataset."""
    lean_allocators()  # before pyarrow is imported
    from exporter.api.client import validate_base_url
    from exporter.engine.sync import SyncConfig, sync

    setup_logging(log_format, verbose)
    try:
        base_url = validate_base_url(base_url)
    except ConfigError as exc:
        ctx = click.get_current_context()
        param = next(p for p in ctx.command.params if p.name == "base_url")
        raise click.BadParameter(str(exc).removeprefix("--base-url "), ctx, param) from None
    if max_rps > ACCOUNT_RPS:
        click.echo(
            f"Warning: --max-rps {max_rps:g} is above the account's limit of 700 requests/min "
            f"({ACCOUNT_RPS:.2f}/s), which the console and every other client share: expect "
            "429s; the sync slows down when it gets them.",
            err=True,
        )
    if events is not None:
        from exporter.events.config import undocumented

        for event_filter in events.filters:
            unknown, known = undocumented(event_filter)
            if unknown:
                # Not refused: the API's values grow. An event left out is never recorded.
                click.echo(
                    f"Warning: --events-filter {event_filter.text!r}: {', '.join(unknown)} is "
                    f"not a {event_filter.field} the API documents ({', '.join(known)}); a typo "
                    "there leaves events out for good",
                    err=True,
                )
    config = SyncConfig(
        data_dir=data_dir,
        storage_options=list(storage_options),
        api_key=read_key(api_key_file),
        base_url=base_url,
        project_ids=list(projects) or None,
        org_ids=list(org_ids) or None,
        max_rps=max_rps or None,
        concurrency=concurrency,
        wait_for_lock=wait_for_lock,
        compact=not no_compact,
        time_budget=time_budget.total_seconds() if time_budget is not None else None,
        max_requests=max_requests,
        route_max_rps=route_max_rps,
        skip_idle=skip_idle,
        full_sweep_every=full_sweep_every.total_seconds(),
        events=events,
        refresh_open_every=refresh_open_every.total_seconds(),
        names_max_age=names_max_age.total_seconds(),
        map_large_allocations=True,  # this process is the run's (a library caller's is not)
    )
    if clock_offset:
        from exporter.engine.walk import now_us

        offset_us = int(clock_offset * 1e6)
        config.clock = lambda: now_us() + offset_us
    show = sys.stderr.isatty() if progress is None else progress
    observer = Progress(show and log_format == "text" and not quiet)
    stop = _StopOnSignal()
    try:
        with stop, _relayed_stderr(log_format):
            summary = sync(config, observer, stop.event)
    except OpsauditError as exc:
        # Lock held, state or storage error: the metrics still say when the last success was.
        from exporter.core.layout import STATE_FILE

        if metrics_file is not None and (
            isinstance(data_dir, str) or (data_dir / STATE_FILE).is_file()
        ):
            with contextlib.suppress(OpsauditError):
                write_metrics_file(metrics_file, data_dir, storage_options)
        if isinstance(exc, StoppedError) and stop.signum == signal.SIGTERM:
            echo_error(str(exc), exit_code=int(ExitCode.TERMINATED))  # (130 is Ctrl-C's)
            sys.exit(int(ExitCode.TERMINATED))
        raise
    finally:
        observer.finish()
    code = summary.exit_code  # interrupted: 130, Ctrl-C's
    if stop.signum == signal.SIGTERM and code is ExitCode.INTERRUPTED:
        code = ExitCode.TERMINATED  # the shell's convention, 128 + 15 (systemctl stop)
    _report_summary(summary, log_format, quiet, code)
    if metrics_file is not None:
        write_metrics_file(metrics_file, data_dir, storage_options)
    sys.exit(int(code))


def _relayed_stderr(log_format: str) -> contextlib.AbstractContextManager[None]:
    """With `--log-format json` in opsaudit's own process: anything on fd 2 made a JSON line
    (`cli._stderr`); a test's CliRunner keeps its process's stderr as it is."""
    root = click.get_current_context().find_root().command
    if log_format != "json" or not getattr(root, "owns_process", False):
        return contextlib.nullcontext()
    from exporter.cli._common import JsonFormatter
    from exporter.cli._stderr import json_lines_on_stderr

    return json_lines_on_stderr(JsonFormatter())


class _StopOnSignal:
    """While a sync runs: the first SIGINT (Ctrl-C) or SIGTERM (systemd's stop) sets `event`,
    which stops new requests at once; the walks commit what they read and the run ends within
    moments with outcome `interrupted` (issue 19, finding 15). A second Ctrl-C aborts at once
    (the state stays consistent: a kill at any instant is safe)."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}

    def _handle(self, signum: int, frame: Any) -> None:
        if self.signum is None:
            self.signum = signum
        self.event.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        # os.write, not click: a handler may run while the main thread is mid-print.
        again = "Ctrl-C again" if signum == signal.SIGINT else "SIGINT"  # (systemd: SIGTERM)
        os.write(
            2,
            f"\n{signal.Signals(signum).name}: stopping; committing what was read "
            f"({again} to abort at once)\n".encode(),
        )

    def __enter__(self) -> _StopOnSignal:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc: object) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)


def _report_summary(
    summary: RunSummary, log_format: str, quiet: bool = False, code: int | None = None
) -> None:
    if quiet:
        pass  # only what went wrong, below
    elif log_format == "json":
        record = {k: v for k, v in vars(summary).items() if k not in ("started_at", "finished_at")}
        record["started_at"] = summary.started_at.isoformat()
        record["finished_at"] = summary.finished_at.isoformat() if summary.finished_at else None
        import orjson

        click.echo(orjson.dumps({"event": "summary", **record}).decode())
    else:
        click.echo(summary.line())
    errors = sorted(summary.errors.items())
    if log_format == "json":  # every project's error, one object each, for the log shipper
        for pid, message in errors:
            echo_error(message, project_id=pid)
    else:
        for pid, message in errors[:20]:
            click.echo(f"  {pid or 'discovery'}: {message}", err=True)  # "": the listings
        if len(errors) > 20:
            click.echo(f"  ... and {len(errors) - 20} more", err=True)
    if summary.error:
        echo_error(summary.error, exit_code=int(summary.exit_code if code is None else code))


@click.command("status", short_help=short_help("status"))
@data_dir_option
@storage_option_option
@output_options(
    ["table", "json"],
    help="json is one object with keys projects, runs, coverage, events and stray_files.",
)
@click.option(
    "--runs",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="How many recent runs to show.",
)
def status_command(
    data_dir: Path | str,
    storage_options: tuple[str, ...],
    fmt: str,
    output: Path | None,
    runs: int,
) -> None:
    """Per project: checkpoint, last sync, open operations, lag; and the last runs."""
    from exporter.ops.status import read_status, render_status
    from exporter.store.readers import reading

    # On object storage: the state of the last committed batch (no lease, nothing written).
    with reading(data_dir, storage_options) as local:
        status = read_status(local, runs=runs)
    emit(render_status(status, fmt), output)


@click.command("compact", short_help=short_help("compact"))
@data_dir_option
@storage_option_option
@click.option("--wait", "wait_for_lock", is_flag=True, help="Wait for a running sync.")
def compact_command(
    data_dir: Path | str, storage_options: tuple[str, ...], wait_for_lock: bool
) -> None:
    """Merge small Parquet files (sync also does this at the end of each run): a month's
    files under 500,000 rows are merged once there are 32 of them, fewer are left as they are
    ("merged away 0 file(s)"). On object storage OPTIMIZE of every month with two or more, then
    VACUUM with a 24-hour retention."""
    lean_allocators()  # before pyarrow is imported
    from exporter.store.opener import open_store

    require_dataset(data_dir, storage_options)  # compaction of nothing is a mistake
    from exporter.engine.publish import compact

    dataset = open_store(data_dir, storage_options, lock=True, wait=wait_for_lock)
    try:
        removed = compact(dataset)
    finally:
        dataset.close()
    from exporter.store.readers import is_url

    # On object storage the merged files stay in the bucket (readers of older versions may
    # still read them) until VACUUM finds them past its retention: "removed" read as deleted.
    kept = (
        " (on object storage the old ones are deleted once 24 hours old)"
        if is_url(data_dir)
        else ""
    )
    click.echo(f"compaction merged away {removed} file(s){kept}")


sync_command.name = "sync"
