"""The configuration file: `opsaudit.toml`, or `[tool.opsaudit]` in `pyproject.toml`.

It sets defaults for the data directory, the base URL, the request rate and the `check`
thresholds. Flags and environment variables win over it: its values become click's
`default_map`, which click consults only for a parameter given neither on the command line nor
through its environment variable.

    data_dir = "/var/lib/opsaudit"
    base_url = "https://console.neon.tech/api/v2/"
    max_rps = 5
    fail_on = ["stuck > 0 over 24h", "failure_rate(apply_config) > 5% over 24h"]
    max_age = "2h"
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from exporter.core.errors import ConfigError

__all__ = [
    "CONFIG_FILE",
    "KEYS",
    "blame_setting",
    "command_config_option",
    "configured",
    "default_map",
    "find_config",
    "named_config",
    "read_config",
]

CONFIG_FILE = "opsaudit.toml"
# Each key of the file and the parameter names it sets, in every command that has them.
KEYS: dict[str, tuple[str, ...]] = {
    "data_dir": ("data_dir", "data_dirs"),
    "base_url": ("base_url",),
    "max_rps": ("max_rps",),
    "fail_on": ("thresholds",),
    "max_age": ("max_age",),
}


# `ctx.meta` key: each parameter whose default a configuration file set -> "SETTING in FILE".
_SET_BY = "opsaudit.config_set_by"

# The demo makes its own dataset, and the simulator serves no real account.
_NOT_CONFIGURED = frozenset({"demo", "simulate"})


def find_config(directory: Path) -> tuple[Path, bool] | None:
    """The file to read in `directory`: opsaudit.toml, else a pyproject.toml with a
    [tool.opsaudit] table (True: the values are under that table); None when neither."""
    own = directory / CONFIG_FILE
    if own.is_file():
        return own, False
    project = directory / "pyproject.toml"
    if project.is_file() and "[tool.opsaudit]" in project.read_text(errors="replace"):
        return project, True
    return None


def named_config(path: Path, hint: str = "'--config'") -> tuple[Path, bool]:
    """The file `--config` names (True: a pyproject.toml, whose values are under
    [tool.opsaudit]); a usage error (naming `hint`) when there is none."""
    if path.is_dir():  # (as click.Path(dir_okay=False) says it)
        raise click.BadParameter(f"File {str(path)!r} is a directory.", param_hint=hint)
    if not path.is_file():
        raise click.BadParameter(f"{path} does not exist", param_hint=hint)
    return path, path.name == "pyproject.toml"


def read_config(path: Path, in_pyproject: bool = False) -> dict[str, Any]:
    """The settings of `path`; `ConfigError` (exit 2) for bad TOML, an unknown key or a value
    of the wrong kind."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the configuration file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    if in_pyproject:
        data = data.get("tool", {}).get("opsaudit", {})
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise ConfigError(
            f"unknown setting {', '.join(unknown)} in {path}; known: {', '.join(KEYS)}"
        )
    if "fail_on" in data and isinstance(data["fail_on"], str):
        data["fail_on"] = [data["fail_on"]]
    for key, value in data.items():
        want, ok = _TYPES[key]
        if not ok(value):
            raise ConfigError(f"{key} in {path} must be {want}, not {_toml_kind(value)}")
    return data


def blame_setting(error: click.BadParameter) -> None:
    """Have a refused value that a configuration file set name that setting and file, not the
    option and its environment variable, which the user never set (`max_rps = -5`)."""
    ctx, param = error.ctx, error.param
    if ctx is None or param is None or param.name is None:
        return
    set_by = ctx.meta.get(_SET_BY, {}).get(param.name)
    if set_by is not None and ctx.get_parameter_source(param.name) is ParameterSource.DEFAULT_MAP:
        error.param_hint = set_by


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


# What each setting holds (click would take `max_rps = true` for 1, a directory named
# "['a', 'b']" for an array, and fail on a date as "a bug").
_TYPES: dict[str, tuple[str, Any]] = {
    "data_dir": ("text (one directory or URL)", lambda v: isinstance(v, str)),
    "base_url": ("text (a URL)", lambda v: isinstance(v, str)),
    "max_rps": ("a number (requests per second)", _number),
    "fail_on": (
        "text or an array of texts (thresholds)",
        lambda v: isinstance(v, list) and all(isinstance(t, str) for t in v),
    ),
    "max_age": ('text (a duration: "2h")', lambda v: isinstance(v, str)),
}


def _toml_kind(value: Any) -> str:
    """A TOML value's kind, as a user reads it in a message."""
    if isinstance(value, bool):
        return f"the boolean {str(value).lower()}"
    if isinstance(value, (int, float)):
        return f"the number {value}"
    if isinstance(value, str):
        return "text"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "a table"
    return "a date or time"


def default_map(
    group: click.Group, settings: dict[str, Any], source: Path
) -> dict[str, dict[str, Any]]:
    """click's `default_map` for `group`: each command's parameters that `settings` (read
    from `source`) set."""
    out: dict[str, dict[str, Any]] = {}
    ctx = click.get_current_context()
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        if configured(name) and command is not None:
            values = _command_defaults(command, settings, ctx, source)
            if values:
                out[name] = values
    return out


def configured(name: str) -> bool:
    """Whether command `name` reads the configuration file."""
    return name not in _NOT_CONFIGURED


def _command_defaults(
    command: click.Command, settings: dict[str, Any], ctx: click.Context, source: Path
) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for key, value in settings.items():
        for param in command.params:
            if param.name in KEYS[key]:
                ctx.meta.setdefault(_SET_BY, {})[param.name] = f"{key} in {source}"
                multiple = getattr(param, "multiple", False)
                if multiple:
                    value = list(value) if isinstance(value, list) else [value]
                values[param.name] = value
    return values


# In the context's meta: whether the command is asked for its help (an empty OPSAUDIT_CONFIG
# must not hide it; `cli._group` sets it, the group's and the command's --config read it).
HELP_ASKED = "opsaudit.help_asked"


def command_config_option() -> click.Option:
    """`--config FILE` after a command's name (`opsaudit sync --config FILE`), as the group's
    before it: the file's settings become the command's defaults, over the group's file's.
    Eager, so its callback sets them before click reads any other parameter's default."""
    return click.Option(
        ["--config", "config_file"],
        type=click.Path(dir_okay=False, path_type=Path),
        is_eager=True,
        expose_value=False,
        callback=_use_command_config,
        help="Settings file, as `opsaudit --config FILE` before the command; this one wins.",
    )


def _use_command_config(ctx: click.Context, param: click.Parameter, value: Path | None) -> None:
    from exporter.cli._common import refuse_empty_variable

    if value is None and ctx.meta.get(HELP_ASKED):
        # The group let an empty OPSAUDIT_CONFIG by for the help, which (eager) would have
        # exited before this: `--help` was an option's value (`sync --project --help`).
        refuse_empty_variable("OPSAUDIT_CONFIG", ctx)
    if value is not None:
        path, in_pyproject = named_config(value)
        values = _command_defaults(ctx.command, read_config(path, in_pyproject), ctx, path)
        ctx.default_map = {**(ctx.default_map or {}), **values}
