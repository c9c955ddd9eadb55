"""The `opsaudit` command line: thin click commands over the library.

Each command group lives in its own module; this one only assembles them. Only this package
prints or exits.
"""

from __future__ import annotations

import click

from exporter.cli._common import OpsauditGroup

__all__ = ["cli", "main"]


@click.group(
    cls=OpsauditGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(None, "-V", "--version", package_name="opsaudit", prog_name="opsaudit")
def cli() -> None:
    """Export a hosted-Postgres platform's operation history to Parquet and query it with DuckDB."""


def _register() -> None:
    from exporter.cli import _demo, _ops, _query, _simulate, _sync

    for module in (_sync, _query, _ops, _simulate, _demo):
        for command in module.COMMANDS:
            cli.add_command(command)


_register()


def main() -> None:
    cli.main(prog_name="opsaudit")
