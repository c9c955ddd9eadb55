"""`opsaudit sync`, `opsaudit status` and `opsaudit compact`."""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import orjson

from exporter._errors import ConfigError, StorageError
from exporter._pacing import DEFAULT_MAX_RPS
from exporter._storage import PROJECTS_FILE, SYNC_RUNS_FILE, Dataset
from exporter.cli._common import DEFAULT_BASE_URL, data_dir_option, fail

if TYPE_CHECKING:
    from exporter._sync import RunSummary


class _JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers (`--log-format json`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        entry.update(getattr(record, "fields", {}))
        return orjson.dumps(entry, default=str).decode()


def _setup_logging(log_format: str, verbose: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(_JsonFormatter())
        level = logging.INFO
    else:
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        level = logging.WARNING
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
    root = logging.getLogger("opsaudit")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _read_key(api_key_file: Path | None) -> str:
    if api_key_file is not None:
        try:
            key = api_key_file.read_text().strip()
        except OSError as exc:
            raise ConfigError(
                f"cannot read --api-key-file {api_key_file}: {exc.strerror}"
            ) from None
        if not key:
            raise ConfigError(f"--api-key-file {api_key_file} is empty")
        return key
    return os.environ.get("NEON_API_KEY", "").strip()


class _Progress:
    """A one-line progress display on a TTY; silent otherwise (cron mails only the summary)."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.total = 0
        self.done = 0
        self.ops = 0
        self.requests = 0
        self.throttled = 0
        self.rate = 0.0
        self.started = time.monotonic()
        self.log = logging.getLogger("opsaudit.events")
        self._lock = threading.Lock()  # events come from every worker thread

    def __call__(self, event: str, data: dict[str, Any]) -> None:
        with self._lock:
            self._update(event, data)

    def _update(self, event: str, data: dict[str, Any]) -> None:
        stats = data.get("stats")
        if stats is not None:
            self.requests, self.throttled = stats.requests, stats.responses_429
        if event == "discovered":
            self.total = data["projects"]
        elif event == "project_done":
            self.done += 1
            self.ops += data["new"] + data["changed"]
            self.rate = data.get("rate") or 0.0
        fields = {k: v for k, v in data.items() if k != "stats"}
        self.log.info(event, extra={"fields": {"event": event, **fields}})
        if self.enabled:
            elapsed = max(time.monotonic() - self.started, 1e-6)
            click.echo(
                f"\rprojects {self.done}/{self.total} | operations {self.ops:,} | "
                f"requests {self.requests:,} | 429s {self.throttled} | "
                f"{self.requests / elapsed:.1f} req/s   ",
                nl=False,
                err=True,
            )

    def finish(self) -> None:
        if self.enabled:
            click.echo("", err=True)


@click.command()
@data_dir_option
@click.option(
    "--api-key-file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="File holding the API key (default: $NEON_API_KEY). Never pass the key itself.",
)
@click.option(
    "--base-url",
    default=lambda: os.environ.get("OPSAUDIT_BASE_URL", DEFAULT_BASE_URL),
    show_default="$OPSAUDIT_BASE_URL or the public API",
    help="The management API's base address.",
)
@click.option(
    "--project",
    "projects",
    multiple=True,
    metavar="ID",
    help="Sync only this project (repeatable); no listing needed.",
)
@click.option(
    "--org-id",
    "org_ids",
    multiple=True,
    metavar="ID",
    help="List only this organization (repeatable).",
)
@click.option(
    "--max-rps",
    type=click.FloatRange(min=0),
    default=lambda: float(os.environ.get("OPSAUDIT_MAX_RPS", DEFAULT_MAX_RPS)),
    show_default=f"$OPSAUDIT_MAX_RPS or {DEFAULT_MAX_RPS:g}",
    help="Requests per second for the whole run (0: no pacing). The account allows 700/min.",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 64),
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
    help="Format of log lines on stderr.",
)
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Progress line on stderr (default: when stderr is a terminal).",
)
@click.option("-v", "--verbose", count=True, help="More log lines (-vv for debug).")
def sync_command(
    data_dir: Path,
    api_key_file: Path | None,
    base_url: str,
    projects: tuple[str, ...],
    org_ids: tuple[str, ...],
    max_rps: float,
    concurrency: int,
    wait_for_lock: bool,
    no_compact: bool,
    log_format: str,
    progress: bool | None,
    verbose: int,
) -> None:
    """Export every project's new and changed operations to the dataset."""
    from exporter._client import validate_base_url
    from exporter._sync import SyncConfig, sync

    _setup_logging(log_format, verbose)
    try:
        base_url = validate_base_url(base_url)
    except ConfigError as exc:
        raise click.BadParameter(str(exc).split(": ", 1)[-1], param_hint="--base-url") from None
    config = SyncConfig(
        data_dir=data_dir,
        api_key=_read_key(api_key_file),
        base_url=base_url,
        project_ids=list(projects) or None,
        org_ids=list(org_ids) or None,
        max_rps=max_rps or None,
        concurrency=concurrency,
        wait_for_lock=wait_for_lock,
        compact=not no_compact,
    )
    # Arrow's default pool (mimalloc) keeps freed batches cached: ~50 MB more peak RSS for a
    # process that only streams batches through. The system allocator returns them.
    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    show = sys.stderr.isatty() if progress is None else progress
    observer = _Progress(show and log_format == "text")
    try:
        summary = sync(config, observer)
    finally:
        observer.finish()
    _report_summary(summary, log_format)
    sys.exit(int(summary.exit_code))


def _report_summary(summary: RunSummary, log_format: str) -> None:
    if log_format == "json":
        record = {k: v for k, v in vars(summary).items() if k not in ("started_at", "finished_at")}
        record["started_at"] = summary.started_at.isoformat()
        record["finished_at"] = summary.finished_at.isoformat() if summary.finished_at else None
        click.echo(orjson.dumps({"event": "summary", **record}).decode())
    else:
        click.echo(summary.line())
    for pid, message in sorted(summary.errors.items())[:20]:
        click.echo(f"  {pid}: {message}", err=True)
    if len(summary.errors) > 20:
        click.echo(f"  ... and {len(summary.errors) - 20} more", err=True)
    if summary.error:
        click.echo(f"Error: {summary.error}", err=True)


@click.command("status")
@data_dir_option
@click.option(
    "--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True
)
@click.option(
    "--runs",
    type=click.IntRange(0),
    default=5,
    show_default=True,
    help="How many recent runs to show.",
)
def status_command(data_dir: Path, fmt: str, runs: int) -> None:
    """Per project: checkpoint, last sync, open operations, lag; and the last runs."""
    import duckdb

    projects_file = data_dir / PROJECTS_FILE
    if not projects_file.exists():
        fail(StorageError(f"no dataset in {data_dir} yet: run `opsaudit sync` first"))
    con = duckdb.connect()
    project_rows = con.execute(
        "SELECT id, name, checkpoint_at, last_synced_at, open_operations, "
        "date_diff('second', last_synced_at, now())::BIGINT AS lag_seconds, "
        "deleted_at IS NOT NULL AS deleted, last_error "
        "FROM read_parquet(?) ORDER BY id",
        [str(projects_file)],
    )
    cols = [d[0] for d in project_rows.description]
    project_data = [dict(zip(cols, r)) for r in project_rows.fetchall()]
    run_rel = con.execute(
        "SELECT run_id, started_at, finished_at, outcome, projects_ok, projects_failed, "
        "requests, responses_429, new_operations, changed_operations "
        "FROM read_parquet(?) ORDER BY started_at DESC LIMIT ?",
        [str(data_dir / SYNC_RUNS_FILE), runs],
    )
    run_cols = [d[0] for d in run_rel.description]
    run_data = [dict(zip(run_cols, r)) for r in run_rel.fetchall()]
    if fmt == "json":
        click.echo(orjson.dumps({"projects": project_data, "runs": run_data}, default=str).decode())
        return
    click.echo(f"{'project':<28} {'checkpoint':<20} {'last sync':<20} {'open':>5} {'lag':>8}  note")
    for p in project_data:
        lag = "-" if p["lag_seconds"] is None else _human_seconds(p["lag_seconds"])
        note = (
            "deleted" if p["deleted"] else (f"error: {p['last_error']}" if p["last_error"] else "")
        )
        click.echo(
            f"{p['id']:<28} {_short(p['checkpoint_at']):<20} {_short(p['last_synced_at']):<20} "
            f"{p['open_operations']:>5} {lag:>8}  {note}"
        )
    click.echo("")
    click.echo(
        f"{'run':<28} {'started':<20} {'outcome':<12} {'ok/failed':>10} {'requests':>9} {'429s':>5} {'new':>8} {'changed':>8}"
    )
    for r in run_data:
        click.echo(
            f"{r['run_id']:<28} {_short(r['started_at']):<20} {r['outcome']:<12} "
            f"{str(r['projects_ok']) + '/' + str(r['projects_failed']):>10} {r['requests']:>9} "
            f"{r['responses_429']:>5} {r['new_operations']:>8} {r['changed_operations']:>8}"
        )


def _short(ts: Any) -> str:
    return "-" if ts is None else ts.strftime("%Y-%m-%d %H:%M:%S")


def _human_seconds(seconds: int) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


@click.command("compact")
@data_dir_option
@click.option("--wait", "wait_for_lock", is_flag=True, help="Wait for a running sync.")
def compact_command(data_dir: Path, wait_for_lock: bool) -> None:
    """Merge small Parquet files (sync also does this at the end of each run)."""
    dataset = Dataset(data_dir, lock=True, wait=wait_for_lock)
    try:
        dataset.recover()
        removed = dataset.compact()
    finally:
        dataset.close()
    click.echo(f"compaction removed {removed} file(s)")


sync_command.name = "sync"
COMMANDS = [sync_command, status_command, compact_command]
