"""Options shared by several commands, and the boundary that maps errors to exit codes."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter._errors import ExitCode, OpsauditError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BASE_URL = "https://console.neon.tech/api/v2/"
DEFAULT_DATA_DIR = "opsaudit-data"


def data_dir_option(f: F) -> F:
    """`--data-dir`, defaulting to $OPSAUDIT_DATA_DIR, then ./opsaudit-data."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        default=lambda: os.environ.get("OPSAUDIT_DATA_DIR", DEFAULT_DATA_DIR),
        show_default="$OPSAUDIT_DATA_DIR or ./opsaudit-data",
        help="Directory holding the Parquet dataset and the state.",
    )(f)


def fail(error: OpsauditError) -> None:
    """Print an error the way every command does and exit with its code."""
    click.echo(f"Error: {error}", err=True)
    sys.exit(int(error.exit_code))


class OpsauditGroup(click.Group):
    """A group that turns our errors into a one-line message and their exit code."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpsauditError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(int(error.exit_code))


def run_guarded(command: click.Group) -> None:
    """Run the click group; map our errors to their exit codes, never a traceback."""
    try:
        command.main(standalone_mode=True)
    except OpsauditError as error:
        fail(error)
    except KeyboardInterrupt:
        click.echo("Interrupted.", err=True)
        sys.exit(130)


__all__ = [
    "DEFAULT_BASE_URL",
    "ExitCode",
    "OpsauditGroup",
    "data_dir_option",
    "fail",
    "run_guarded",
]
