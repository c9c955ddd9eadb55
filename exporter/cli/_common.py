"""Options shared by several commands, and the boundary that maps errors to exit codes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from exporter._errors import ConfigError, ExitCode, OpsauditError

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_BASE_URL = "https://console.neon.tech/api/v2/"
DEFAULT_DATA_DIR = "opsaudit-data"


def data_dir_option(f: F) -> F:
    """`--data-dir`, from $OPSAUDIT_DATA_DIR when not given, else ./opsaudit-data."""
    return click.option(
        "--data-dir",
        type=click.Path(file_okay=False, path_type=Path),
        envvar="OPSAUDIT_DATA_DIR",
        show_envvar=True,
        default=DEFAULT_DATA_DIR,
        show_default=True,
        help="Directory holding the Parquet dataset and the state.",
    )(f)


def existing_data_dir(data_dir: Path) -> Path:
    """`data_dir`, or a usage error (exit 2) when it does not exist: read commands never create
    it, and a mistyped path would otherwise answer every question with nothing."""
    if not data_dir.is_dir():
        raise ConfigError(
            f"--data-dir {data_dir} does not exist; run `opsaudit sync --data-dir {data_dir}` "
            "first, or point --data-dir (or $OPSAUDIT_DATA_DIR) at an existing dataset"
        )
    return data_dir


def output_options(formats: Sequence[str], help: str | None = None) -> Callable[[F], F]:
    """`--format` (the first of `formats` is the default) and `-o/--output FILE`, written once
    for every command that prints a result (sqlite-utils' `output_options`)."""

    def decorator(f: F) -> F:
        f = click.option(
            "--output",
            "-o",
            type=click.Path(dir_okay=False, writable=True, path_type=Path),
            default=None,
            help="Write to FILE instead of stdout.",
        )(f)
        return click.option(
            "--format",
            "fmt",
            type=click.Choice(list(formats)),
            default=formats[0],
            show_default=True,
            help=help,
        )(f)

    return decorator


def emit(text: str, output: Path | None) -> None:
    """Print `text`, or write it to `output` (the `-o` of `output_options`)."""
    if output is None:
        click.echo(text, nl=False)
    else:
        try:
            output.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot write -o {output}: {exc.strerror}") from None


def metrics_file_option(f: F) -> F:
    """`--metrics-file PATH`: Prometheus textfile-collector output, replaced atomically."""
    return click.option(
        "--metrics-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Also write Prometheus metrics to FILE (node_exporter textfile collector: "
        "name it *.prom in its directory); replaced atomically.",
    )(f)


def write_metrics_file(
    path: Path, data_dir: Path, extra: Sequence[Any] = (), as_of: Any = None
) -> None:
    """Collect the trail's metrics from `data_dir` (plus `extra` families) and write `path`."""
    from exporter._metrics import collect_metrics, write_metrics

    try:
        write_metrics(path, [*collect_metrics(data_dir, as_of=as_of), *extra])
    except OSError as exc:
        raise ConfigError(f"cannot write --metrics-file {path}: {exc.strerror}") from None


class OpsauditGroup(click.Group):
    """The one place that maps errors to exit codes: our errors become a one-line message and
    their code (README, exit codes), Ctrl-C is 130; never a traceback for either."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpsauditError as error:
            click.echo(f"Error: {error}", err=True)
            ctx.exit(int(error.exit_code))
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)


__all__ = [
    "DEFAULT_BASE_URL",
    "ExitCode",
    "OpsauditGroup",
    "data_dir_option",
    "emit",
    "existing_data_dir",
    "metrics_file_option",
    "output_options",
    "write_metrics_file",
]
