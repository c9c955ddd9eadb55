"""The `opsaudit` group: its commands, each imported when first asked for, and the one place
that maps errors to exit codes."""

from __future__ import annotations

import logging
import os
from typing import Any

import click

from exporter.cli._common import echo_error, numpy_out_of_reach
from exporter.core.errors import AccessDeniedError, ExitCode, OpsauditError, redact

# Every command: its module, its function, and the line `opsaudit --help` lists it with. A
# command's module is imported only when that command runs (or shows its own help), so
# `opsaudit --help` imports none of them (PRODUCT.md: `--help` <= 80 ms).
COMMANDS: dict[str, tuple[str, str, str]] = {
    "check": ("_ops", "check_command", "Find what needs attention (exit 8, one line each)."),
    "compact": ("_sync", "compact_command", "Merge small data files into fewer, larger ones."),
    "demo": ("_demo", "demo_command", "Sync a simulated account and print the report."),
    "discard-events": (
        "_events",
        "discard_events_command",
        "Drop the events waiting for a sink no longer used.",
    ),
    "doctor": ("_ops", "doctor_command", "Check the set-up and say what to fix."),
    "query": ("_query", "query_command", "Run one SQL statement over the views."),
    "report": ("_query", "report_command", "What is failing or stuck now, and the trends."),
    "simulate": ("_simulate", "simulate", "Serve a simulated API on 127.0.0.1 until Ctrl-C."),
    "status": ("_sync", "status_command", "Per project: checkpoint, lag, open operations."),
    "sync": ("_sync", "sync_command", "Export new and changed operations to the dataset."),
}


# The commands that stream batches through Arrow: `cli._common.lean_allocators`.
STREAMING = frozenset({"sync", "compact", "demo"})
# ... and those of them that run as if numpy were not installed (`cli._common.numpy_out_of_reach`;
# the demo's report and page may use it).
WITHOUT_NUMPY = frozenset({"sync", "compact"})


def short_help(name: str) -> str:
    """The line `opsaudit --help` shows for command `name` (declared once, in COMMANDS)."""
    return COMMANDS[name][2]


CONFIG_AFTER = "opsaudit.config_after_the_command"


def _end_of_options(args: list[str]) -> int:
    return args.index("--") if "--" in args else len(args)


class OpsauditGroup(click.Group):
    """The one place that maps errors to exit codes: our errors become a one-line message and
    their code (README, exit codes), Ctrl-C is 130; never a traceback for either. Any other
    error is a bug: one line and exit 5 (never 1, "partial", which a service manager may take
    for success); its traceback goes to the log (`-v`, and always with `--log-format json`).

    Its commands are those of COMMANDS, each imported when first asked for."""

    # Whether opsaudit owns the process (the console script, `python -m exporter`): only then
    # may a command change what the rest of the process can import. A notebook that calls the
    # command line in-process keeps its numpy.
    owns_process = False

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_GIVEN] = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.Exit:
            raise  # --help, --version
        except click.NoSuchOption as error:
            not_run(ctx)  # `opsaudit --typo check`: check's verdict is not ok
            raise visible_only(error) from None
        # (Nothing else the group's parser refuses reaches a command: `--config DIR` is refused
        # in the group's callback, which tells the command; `--version=1 check` leaves no
        # telling where check's arguments start.)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            import importlib

            module, function, _ = COMMANDS[cmd_name]
            from exporter.cli._config import command_config_option, configured

            command = getattr(importlib.import_module(f"exporter.cli.{module}"), function)
            if configured(
                cmd_name
            ):  # `opsaudit sync --config FILE` as `opsaudit --config FILE sync`
                command.params.append(command_config_option())
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        # Whether the command is given its own --config: then no file is looked for in the
        # current directory (one there that is broken must not fail a run that names another).
        from exporter.cli._config import HELP_ASKED

        options = rest[: _end_of_options(rest)]
        ctx.meta[CONFIG_AFTER] = any(a == "--config" or a.startswith("--config=") for a in options)
        ctx.meta[HELP_ASKED] = any(a in ctx.help_option_names for a in options)
        if name in STREAMING:
            # Arrow's C++ reads its pool's name once, when pyarrow is first imported, and an
            # option's callback may import it before the command's body calls lean_allocators
            # (the events options do): chosen here, before the command's options are parsed.
            os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
        if name in WITHOUT_NUMPY and self.owns_process:
            numpy_out_of_reach()  # before an option's callback may import pyarrow
        return name, command, rest

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's listing, from COMMANDS: no command module is imported to show it."""
        rows = [(name, short_help(name)) for name in self.list_commands(ctx) if name in COMMANDS]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except OpsauditError as error:
            echo_error(str(error), exit_code=int(error.exit_code))
            ctx.exit(int(error.exit_code))
        except KeyboardInterrupt:
            click.echo("Interrupted.", err=True)
            ctx.exit(130)
        except click.BadParameter as error:
            from exporter.cli._config import blame_setting

            blame_setting(error)  # a value the configuration file set names it
            raise
        except click.NoSuchOption as error:  # a command's options, parsed in super().invoke
            raise visible_only(error) from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's own: usage errors (2), ctx.exit, a refused prompt
        except RuntimeError as error:
            if str(error) != _DUCKDB_INTERRUPTED:
                _unexpected(ctx, error)
            click.echo("Interrupted.", err=True)  # Ctrl-C during a query: DuckDB's own error
            ctx.exit(130)
        except PermissionError as error:
            # No bug: the user running opsaudit may not read or write a file (another user's
            # data directory, a mode of 000).
            denied = AccessDeniedError(error.filename or "a file")
            echo_error(str(denied), exit_code=int(denied.exit_code))
            ctx.exit(int(denied.exit_code))
        except Exception as error:
            _unexpected(ctx, error)
        except BaseException as error:
            # A Rust panic out of a native library (pyo3's PanicException derives from
            # BaseException): a bug like any other, not a traceback and exit 1 ("partial").
            if isinstance(error, (SystemExit, GeneratorExit)):
                raise
            _unexpected(ctx, error)


_GIVEN = "opsaudit.given_arguments"


def visible_only(error: click.NoSuchOption) -> click.NoSuchOption:
    """`error` with its "Did you mean" drawn from the options `--help` shows: click offers the
    closest of every option, hidden ones too (`sync --log-fmt`: "Did you mean one of:
    '--clock-offset', '--log-format'?", a test-only option)."""
    ctx = error.ctx
    if ctx is None or not error.possibilities:
        return error
    visible = [
        name
        for param in ctx.command.get_params(ctx)
        if isinstance(param, click.Option) and not param.hidden
        for name in (*param.opts, *param.secondary_opts)
        if name.startswith("--")
    ]
    return click.NoSuchOption(error.option_name, error.message, visible, ctx)


def not_run(ctx: click.Context) -> None:
    """The group failed (its --config, OPSAUDIT_CONFIG or ./opsaudit.toml could not be read, an
    option of its own unknown) before the command's options were parsed: a command that must
    leave a trace of every end (`check --metrics-file` writes `opsaudit_check_ok 0`: its
    `not_run`) is told, with its own arguments. Those are split from the group's by the group's
    parser alone (no value is converted, no file read): the parse that failed is not trusted
    for anything."""
    parser = ctx.command.make_parser(ctx)  # the group's: stops at the first positional
    parser.ignore_unknown_options = True  # `opsaudit --typo check ...`: kept, before `check`
    try:
        _, rest, _ = parser.parse_args(list(ctx.meta.get(_GIVEN, ())))
    except click.exceptions.UsageError:
        return  # no telling where the command's arguments start (`--config` without a value)
    group = ctx.command
    if not isinstance(group, click.Group):
        return
    names = set(group.list_commands(ctx))
    at = next((i for i, arg in enumerate(rest) if arg in names), None)
    hook = None if at is None else getattr(group.get_command(ctx, rest[at]), "not_run", None)
    if hook is not None and at is not None:
        hook(ctx, rest[at + 1 :])


# What DuckDB raises when Ctrl-C interrupts a query (not a KeyboardInterrupt).
_DUCKDB_INTERRUPTED = "Query interrupted"


def _unexpected(ctx: click.Context, error: BaseException) -> None:
    """A bug: one line and exit 5 (never 1, "partial"); the traceback in the log."""
    # `-v` makes this INFO line visible; the JSON log (INFO) always carries it.
    logging.getLogger("opsaudit").info("unexpected error", exc_info=error)
    text = redact(f"{type(error).__name__}: {error}")
    click.echo(
        f"Error: unexpected error ({text}). This is a bug in opsaudit: {_hint(ctx)}", err=True
    )
    ctx.exit(int(ExitCode.FATAL))


def _hint(ctx: click.Context) -> str:
    """What to do about a bug: where the command has `-v` (its log), the traceback is there."""
    name = ctx.invoked_subcommand
    command = (
        ctx.command.get_command(ctx, name)
        if name and isinstance(ctx.command, click.Group)
        else None
    )
    if command is not None and any(p.name == "verbose" for p in command.params):
        return "run again with -v for the traceback and report it"
    return "report it with the command that failed"


__all__ = ["COMMANDS", "STREAMING", "OpsauditGroup", "not_run", "short_help"]
