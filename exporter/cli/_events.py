"""`opsaudit sync`'s event options (issue 22): one decorator that adds them and hands the
command a single `events` argument (an `EventsConfig`, or None when no sink is given)."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter.cli._common import (
    data_dir_option,
    env_option,
    require_dataset,
    storage_option_option,
)
from exporter.cli._group import short_help
from exporter.cli._ops import FiniteFloatRange
from exporter.core.errors import ConfigError
from exporter.events.config import SINKS

F = TypeVar("F", bound=Callable[..., Any])

_NAMES = (
    "events_file",
    "webhook",
    "webhook_secret_file",
    "events_backfill",
    "events_filters",
    "webhook_timeout",
    "webhook_attempts",
)


def events_options(f: F) -> F:
    """Add `--events-file`, `--webhook`, `--webhook-secret-file`, `--events-backfill` and
    `--events-filter` to a command; it receives `events` instead of them."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        values = {name: kwargs.pop(name) for name in _NAMES}
        try:
            kwargs["events"] = build_events_config(**values)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
        return f(*args, **kwargs)

    options = [
        env_option(
            "--events-file",
            type=click.Path(dir_okay=False, path_type=Path),
            envvar="OPSAUDIT_EVENTS_FILE",
            show_envvar=True,
            help="Append one JSON line per new operation state to this file (each event "
            "exactly once, also across kills).",
        ),
        env_option(
            "--webhook",
            metavar="URL",
            envvar="OPSAUDIT_WEBHOOK_URL",
            show_envvar=True,
            help="POST each event to this URL, signed per Standard Webhooks (needs "
            "--webhook-secret-file); what it does not accept waits for the next run.",
        ),
        env_option(
            "--webhook-secret-file",
            type=click.Path(dir_okay=False, path_type=Path),
            envvar="OPSAUDIT_WEBHOOK_SECRET_FILE",
            show_envvar=True,
            help="File holding the webhook's signing secret (whsec_<base64>).",
        ),
        click.option(
            "--events-backfill",
            is_flag=True,
            help="Also emit events for the states a project's first walk records.",
        ),
        click.option(
            "--events-filter",
            "events_filters",
            multiple=True,
            metavar="FIELD=V1,V2",
            help="Emit only events whose action or status is one of the values (FIELD!=... "
            "leaves them out); repeatable, all must hold. E.g. status=failed,error.",
        ),
        # Tuning for tests and slow receivers: seconds per attempt, attempts per event and run.
        click.option(
            "--webhook-timeout", type=FiniteFloatRange(min=0.01), default=10.0, hidden=True
        ),
        click.option("--webhook-attempts", type=click.IntRange(min=1), default=6, hidden=True),
    ]
    for option in reversed(options):
        wrapper = option(wrapper)
    return wrapper  # type: ignore[return-value]


def _warn_without_a_sink(flags: dict[str, Any]) -> None:
    """No sink, no event: the flags that shape events do nothing (a sink's variable unset in
    the shell that runs the sync?)."""
    given = [flag for flag, value in flags.items() if value]
    if given:
        click.echo(
            f"Warning: {' and '.join(given)} without --events-file or --webhook: no event is "
            "recorded",
            err=True,
        )


def build_events_config(
    events_file: Path | None,
    webhook: str | None,
    webhook_secret_file: Path | None,
    events_backfill: bool,
    events_filters: tuple[str, ...],
    webhook_timeout: float,
    webhook_attempts: int,
) -> Any:
    """The run's `EventsConfig`, or None when neither a file nor a webhook is given;
    `ConfigError` (a usage error) for a webhook without a usable secret."""
    from exporter.events.outbox import EventsConfig, parse_event_filter

    # A malformed filter is an error with or without a sink (a typo is not silently ignored).
    filters = [parse_event_filter(t) for t in events_filters]
    secret_alone = webhook_secret_file is not None and not webhook
    if events_file is None and not webhook:
        flags = {"--events-filter": filters, "--events-backfill": events_backfill}
        _warn_without_a_sink({**flags, "--webhook-secret-file": secret_alone})
        return None
    if secret_alone:
        # Cron's environment without $OPSAUDIT_WEBHOOK_URL: this run's events never reach
        # the webhook's outbox (a later run with the URL does not send them), said nowhere.
        click.echo(
            "Warning: --webhook-secret-file without --webhook: no webhook gets this run's events",
            err=True,
        )
    if events_file is not None and events_file.exists() and not events_file.is_file():
        from exporter.events.eventsfile import NOT_A_FILE

        # (A directory is click's to refuse.) Not /dev/stdout: a log shipper tails a file.
        raise ConfigError(f"--events-file {events_file} is {NOT_A_FILE}: give a file's path")
    from exporter.events.webhook import read_webhook_secret, validate_webhook_url

    key = None
    if webhook:
        webhook = validate_webhook_url(webhook)
        if webhook_secret_file is None:
            raise ConfigError(
                "--webhook needs --webhook-secret-file (or $OPSAUDIT_WEBHOOK_SECRET_FILE): a "
                "file holding the Standard Webhooks secret, whsec_<base64>"
            )
        key = read_webhook_secret(webhook_secret_file)
    return EventsConfig(
        file=events_file,
        webhook_url=webhook or None,
        webhook_key=key,
        backfill=events_backfill,
        filters=filters,
        webhook_timeout=webhook_timeout,
        webhook_attempts=webhook_attempts,
    )


@click.command("discard-events", short_help=short_help("discard-events"))
@data_dir_option
@storage_option_option
@click.option(
    "--sink",
    type=click.Choice(SINKS),
    required=True,
    help="The sink whose waiting events are dropped; the other's are kept.",
)
@click.option("--wait", "wait_for_lock", is_flag=True, help="Wait for a running sync.")
def discard_events_command(
    data_dir: Path | str, storage_options: tuple[str, ...], sink: str, wait_for_lock: bool
) -> None:
    """Drop the events waiting for a sink no longer given to `sync` (events are never dropped
    otherwise: `check` reports them as `events_backlog` for as long as they wait). A sink
    still in use needs none of this: its next run delivers them."""
    from exporter.engine.publish import discard_events
    from exporter.store.opener import open_store

    require_dataset(data_dir, storage_options)
    store = open_store(data_dir, storage_options, lock=True, wait=wait_for_lock)
    try:
        n, oldest = discard_events(store, sink)
    finally:
        store.close()
    if n and oldest is not None:
        since = dt.datetime.fromtimestamp(oldest / 1e6, dt.timezone.utc)
        click.echo(
            f"discarded {n} event(s) waiting for the {sink}, the oldest since "
            f"{since:%Y-%m-%d %H:%M:%SZ}"
        )
    else:
        click.echo(f"no event waits for the {sink}")
