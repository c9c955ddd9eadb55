"""The `opsaudit` command line: thin click commands over the library.

Each command group lives in its own module, imported when one of its commands runs
(`_common.COMMANDS`: `opsaudit --help` lists them from that table without importing any). Only
this package prints or exits. A command imports the library it runs inside its function:
`opsaudit --help` loads none of httpx, pyarrow or DuckDB (start-up, PRODUCT.md performance
targets).
"""

from __future__ import annotations

from pathlib import Path

import click

from exporter.cli._common import refuse_empty_variable
from exporter.cli._group import CONFIG_AFTER, OpsauditGroup, not_run

__all__ = ["cli", "main"]


@click.group(
    cls=OpsauditGroup,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.version_option(None, "-V", "--version", package_name="opsaudit", prog_name="opsaudit")
@click.option(
    "--config",
    "config_file",
    # Not dir_okay=False: click would refuse $OPSAUDIT_CONFIG naming a directory while the
    # group is parsed, before a command's own --config could win over it (`named_config`).
    type=click.Path(path_type=Path),
    metavar="FILE",
    envvar="OPSAUDIT_CONFIG",
    show_envvar=True,
    default=None,
    help="Settings file (data_dir, base_url, max_rps, fail_on, max_age); flags and environment "
    "variables win over it.  [default: ./opsaudit.toml, else [tool.opsaudit] in "
    "./pyproject.toml]",
)
@click.pass_context
def cli(ctx: click.Context, config_file: Path | None) -> None:
    """Export a hosted-Postgres platform's operation history to Parquet and query it with DuckDB."""
    from click.core import ParameterSource

    from exporter.cli._config import (
        HELP_ASKED,
        configured,
        default_map,
        find_config,
        named_config,
        read_config,
    )

    if ctx.invoked_subcommand is not None and not configured(ctx.invoked_subcommand):
        return  # the demo and the simulator: a broken file must not stop them (README)
    from_env = ctx.get_parameter_source("config_file") is ParameterSource.ENVIRONMENT
    try:
        # The group's --config is no `EnvOption` (its variable would be refused while the group
        # is parsed): checked here, where a command's own --config wins over it. Not for
        # `opsaudit sync --help` (the help reads as with the variable unset).
        own_config = ctx.meta.get(CONFIG_AFTER)
        if not own_config and not ctx.meta.get(HELP_ASKED) and (config_file is None or from_env):
            refuse_empty_variable("OPSAUDIT_CONFIG", ctx)
        if own_config and (config_file is None or from_env):
            # `opsaudit query --config FILE`: that file, not the directory's, nor the one
            # $OPSAUDIT_CONFIG names (not read at all: an option wins over its variable).
            found: tuple[Path, bool] | None = None
        elif config_file is not None:
            hint = "'--config' (env var: 'OPSAUDIT_CONFIG')" if from_env else "'--config'"
            found = named_config(config_file, hint)
        else:
            found = find_config(Path.cwd())
        if found is not None:
            # click consults the default map only for what neither a flag nor the environment
            # set.
            ctx.default_map = default_map(cli, read_config(*found), found[0])
    except Exception:
        not_run(ctx)  # `check --metrics-file`: not ok, not the last verdict
        raise


def main() -> None:
    """The console script and `python -m exporter`: the process is opsaudit's."""
    cli.owns_process = True
    cli.main(prog_name="opsaudit")
