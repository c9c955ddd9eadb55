"""Options shared by several commands and logging (progress: `_progress`; the boundary that maps errors to
exit codes is `_group.OpsauditGroup`)."""

from __future__ import annotations

import codecs
import functools
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from exporter.core.errors import (
    AuthError,
    ConfigError,
    ExitCode,
    StorageError,
    missing_data_dir,
    redact,
    redact_url,
    unreadable_key_file,
)
from exporter.core.model import DEFAULT_BASE_URL
from exporter.core.pathcheck import data_dir_problem

if TYPE_CHECKING:
    pass

F = TypeVar("F", bound=Callable[..., Any])

DEFAULT_DATA_DIR = "opsaudit-data"


class DataDir(click.ParamType):
    """A local directory (a `Path`; `file:///abs` too) or an object-storage URL (kept as the
    string: s3://bucket/prefix, gs://..., az://...). Any other scheme or a malformed URL is a
    usage error (exit 2), never a local folder named `s3:`."""

    name = "directory"

    def __init__(self, urls: bool = True):
        self.urls = urls

    def split_envvar_value(self, rv: str) -> Sequence[str]:
        # $OPSAUDIT_DATA_DIR names one directory, spaces and colons included (s3://...).
        return (rv,)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Path):
            return self._directory(value, param, ctx)
        text = str(value)
        if text.strip() and ":" not in text:
            # No scheme: a local path (the lake package costs ~17 ms to load).
            return self._directory(Path(text), param, ctx)
        from exporter.store.lake.location import parse_location  # no pyarrow, no deltalake

        try:
            loc = parse_location(text)
        except ConfigError as exc:
            self.fail(str(exc).removeprefix("--data-dir "), param, ctx)
        if loc.is_local:
            path = loc.path if text.strip().lower().startswith("file:") else Path(text)
            return self._directory(path, param, ctx)
        if not self.urls:
            self.fail(f"{text}: this command works on local data directories only", param, ctx)
        return loc.url

    def _directory(
        self, path: Path, param: click.Parameter | None, ctx: click.Context | None
    ) -> Path:
        # Every command, before anything runs: a path no sync can create (a file, or one on
        # the way, a symlink loop, ...) is a usage error; the sync would fail, exit 6, the
        # readers would say "does not exist; run sync", a loop was "a bug", exit 5.
        problem = data_dir_problem(path)
        if problem is not None:
            self.fail(problem, param, ctx)
        return path


class Identifier(click.ParamType):
    """An id of the platform's (`--project`, `--org-id`): an empty one is a usage error, not a
    project with no id (it was tried, answered 404 and stayed in the state as one)."""

    name = "id"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from exporter.engine.settings import id_problem  # the library's rule (sync() applies it)

        problem = id_problem(str(value))
        if problem is not None:
            self.fail(problem, param, ctx)
        return str(value)


def refuse_empty_variable(name: str, ctx: click.Context | None = None) -> None:
    """The rule for every variable the command line reads: empty or blank, it is a usage error
    naming it, never unset (click's reading): `OPSAUDIT_DATA_DIR=$DATA` in a crontab without
    $DATA back-filled a new ./opsaudit-data (exit 0) while the real dataset went stale. No
    variable documents an empty value as meaningful."""
    value = os.environ.get(name)
    if value is not None and not value.strip():
        raise click.UsageError(f"{name} is set but empty: give it a value or unset it", ctx)


class EnvOption(click.Option):
    """An option with an environment variable, held to `refuse_empty_variable` where click
    reads the variable: only when the option is not on the command line (the option wins, its
    variable is not read), before the configuration file and the default, so nothing falls
    back. A check in the group's callback would have to parse each command's arguments again.
    Every option with a variable is one (`env_option`; tests/ops/test_empty_environment.py)
    but the group's --config, checked in its callback (a command's own --config wins)."""

    def resolve_envvar_value(self, ctx: click.Context) -> str | None:
        if not ctx.resilient_parsing:  # shell completion: no error for a half-typed line
            names = [self.envvar] if isinstance(self.envvar, str) else self.envvar or ()
            for name in names:
                refuse_empty_variable(name, ctx)
        return super().resolve_envvar_value(ctx)


env_option = functools.partial(click.option, cls=EnvOption)


class ConfiguredUrlOption(EnvOption):
    """An option a configuration file may set to a URL (`--base-url`, `--data-dir`): `--help`
    shows that default as an error would, without userinfo, query or fragment (`base_url =
    "https://u:pw@proxy/api/v2?token=..."` was printed whole under each command)."""

    def get_help_extra(self, ctx: click.Context) -> Any:
        extra = super().get_help_extra(ctx)
        if "default" in extra:
            extra["default"] = redact_url(extra["default"])
        return extra


# `click.option` of an option a configuration file may set to a URL.
url_option = functools.partial(click.option, cls=ConfiguredUrlOption)


def data_dir_option(f: F, *, urls: bool = True, several: bool = False) -> F:
    """`--data-dir` ($OPSAUDIT_DATA_DIR, else ./opsaudit-data); `several`: as `data_dirs`."""
    if several:
        text = (
            "Directory holding the Parquet dataset and the state, or s3://bucket/prefix, "
            "gs://..., az://... (Delta tables). Repeat to read several datasets together: the "
            "views gain a `dataset` column and `operations` holds each operation once."
        )
    elif urls:
        text = (
            "Directory holding the Parquet dataset and the state, or s3://bucket/prefix, "
            "gs://..., az://... (Delta tables, state beside them)."
        )
    else:
        text = "Directory holding the Parquet dataset and the state."
    return url_option(
        "--data-dir",
        "data_dirs" if several else "data_dir",
        type=DataDir(urls),
        multiple=several,
        envvar="OPSAUDIT_DATA_DIR",
        show_envvar=True,
        default=(DEFAULT_DATA_DIR,) if several else DEFAULT_DATA_DIR,
        show_default=True,
        help=text,
    )(f)


def data_dirs_option(f: F) -> F:
    """`--data-dir`, repeatable: the readers (query, report) read several datasets together."""
    return data_dir_option(f, several=True)


def storage_option_option(f: F) -> F:
    """`--storage-option KEY=VALUE` (repeatable): object-storage settings, never credentials."""
    return click.option(
        "--storage-option",
        "storage_options",
        multiple=True,
        metavar="KEY=VALUE",
        help="Object storage setting, repeatable, as deltalake names it (AWS_ENDPOINT_URL, "
        "AWS_REGION, AWS_ALLOW_HTTP, ...). Credentials come only from the environment or "
        "profile chain, never from here.",
    )(f)


def existing_data_dir(data_dir: Path) -> Path:
    """`data_dir`, or a usage error (exit 2) when it does not exist: read commands never create
    it, and a mistyped path would otherwise answer every question with nothing."""
    if not data_dir.is_dir():
        raise missing_data_dir(data_dir)
    return data_dir


def require_dataset(data_dir: Path | str, storage_options: Sequence[str]) -> None:
    """`StorageError` (exit 6, "run `opsaudit sync` first") unless a dataset is there: a
    command that changes one never creates a directory, a state file or a bucket prefix."""
    if isinstance(data_dir, Path):
        from exporter.core.layout import STATE_FILE

        if not (existing_data_dir(data_dir) / STATE_FILE).is_file():
            raise StorageError(f"no dataset in {data_dir} yet: run `opsaudit sync` first")
    else:
        from exporter.store.readers import reading

        with reading(data_dir, storage_options):  # StorageError when no dataset is there
            pass


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


def emit(text: str | bytes, output: Path | None) -> None:
    """Print `text`, or write it to `output` (the `-o` of `output_options`); bytes as they are
    (UTF-8 already: the report's JSON)."""
    if output is None:
        from exporter.cli._stdout import to_stdout  # (not for --help: its import list)

        to_stdout(text)
    else:
        from exporter.core.layout import replace_output

        data = text if isinstance(text, bytes) else text.encode("utf-8")
        try:
            replace_output(output, data)  # the previous file stays whole when this fails
        except OSError as exc:
            raise ConfigError(f"cannot write -o {output}: {exc.strerror or exc}") from None


def api_options(f: F) -> F:
    """`--api-key-file` and `--base-url` (from $OPSAUDIT_BASE_URL when not given)."""
    f = url_option(
        "--base-url",
        envvar="OPSAUDIT_BASE_URL",
        show_envvar=True,
        default=DEFAULT_BASE_URL,
        show_default=True,
        help="The management API's base address.",
    )(f)
    return click.option(
        "--api-key-file",
        type=click.Path(dir_okay=False, path_type=Path),
        help="File holding the API key (default: $NEON_API_KEY). Never pass the key itself.",
    )(f)


class TextFormatter(logging.Formatter):
    """`TIME LEVEL logger: message key=value ...` (and a traceback when one is attached),
    redacted: the facts the JSON lines carry (project, counts, time), for people."""

    def __init__(self) -> None:
        super().__init__("%(levelname)s %(name)s: %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created))
        text = super().format(record)
        fields = getattr(record, "fields", {})
        facts = " ".join(f"{k}={v}" for k, v in fields.items() if k != "event" and v is not None)
        if facts:
            head, sep, rest = text.partition("\n")  # after the message, before a traceback
            text = f"{head} {facts}{sep}{rest}"
        return redact(f"{stamp} {text}")


class JsonFormatter(logging.Formatter):
    """One JSON object per line, for log shippers (`--log-format json`)."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": redact(record.getMessage()),
        }
        if record.exc_info:
            entry["traceback"] = redact(self.formatException(record.exc_info))
        entry.update(getattr(record, "fields", {}))
        import orjson  # not at start-up: `opsaudit --help` stays light

        return orjson.dumps(entry, default=str).decode()


# Set in the click context's meta (shared by the whole command line) by `--log-format json`:
# then the last error lines on stderr are JSON objects too, like every other line there.
JSON_ERRORS = "opsaudit.json_errors"


def echo_error(message: str, **fields: Any) -> None:
    """`Error: message` (redacted: it may quote the server) on stderr, or one JSON object."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None and ctx.meta.get(JSON_ERRORS):
        import orjson

        entry = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "level": "error",
            "logger": "opsaudit",
            "message": redact(message),
            **fields,
        }
        click.echo(orjson.dumps(entry, default=str).decode(), err=True)
    else:
        click.echo(f"Error: {redact(message)}", err=True)


class _NumpyOutOfReach:
    """A `sys.meta_path` finder (a plain class: `importlib.abc` is not imported for --help)."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.partition(".")[0] == "numpy":
            raise ImportError("numpy is not needed by this command (opsaudit sync, compact)")
        return None


def numpy_out_of_reach() -> None:
    """The rest of this process runs as where numpy is not installed (it is no dependency of
    opsaudit): for sync and compact, whose Arrow columns are built from Python lists and
    buffers, never from numpy. pyarrow imports numpy when it can, only to offer conversions
    these commands never ask for: ~0.1 s of CPU and ~10 MiB per run (issue 24). Refused for
    the whole process, not only while pyarrow imports: pyarrow then knows numpy as absent, and
    a conversion asked for later fails with its ImportError rather than reaching a numpy that
    pyarrow never initialised. A no-op once numpy is loaded (a notebook, a test process); only
    called where opsaudit owns the process (`OpsauditGroup.owns_process`)."""
    if "numpy" in sys.modules or any(isinstance(f, _NumpyOutOfReach) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _NumpyOutOfReach())


def lean_allocators() -> None:
    """Allocators for a process that streams batches through (sync, compact, demo): call it
    before anything imports pyarrow.

    Arrow's default pool (mimalloc) keeps what it freed cached in a 1 GiB reservation: ~20 MiB
    more peak RSS at 1M operations (issue 24). Setting pyarrow's pool reaches what Python code
    allocates; Arrow's C++ (the Parquet writer and reader, compute kernels) uses the pool
    `ARROW_DEFAULT_MEMORY_POOL` names when pyarrow is imported, which
    `_group.OpsauditGroup.resolve_command` sets before these commands' options are parsed (an
    option's callback may import pyarrow). Then two glibc malloc arenas instead of one per
    thread (up to 8 per core): the walkers, the committer, Arrow's threads and an in-process
    simulator's each kept a fragmented arena (issue 13). A no-op where libc is not glibc.
    """
    import contextlib
    import ctypes

    import pyarrow as pa

    pa.set_memory_pool(pa.system_memory_pool())
    m_arena_max = -8  # glibc's malloc.h
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").mallopt(m_arena_max, 2)


def setup_logging(log_format: str, verbose: int) -> None:
    """Log lines of the `opsaudit` loggers on stderr: text (warnings) or JSON (info)."""
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.meta[JSON_ERRORS] = log_format == "json"
    handler = logging.StreamHandler(sys.stderr)
    if log_format == "json":
        handler.setFormatter(JsonFormatter())
        level = logging.INFO
    else:
        handler.setFormatter(TextFormatter())
        level = logging.WARNING
    if verbose:
        level = logging.DEBUG if verbose > 1 else logging.INFO
    root = logging.getLogger("opsaudit")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def read_key(api_key_file: Path | None) -> str:
    """The key from `--api-key-file`, else $NEON_API_KEY (never a command-line argument)."""
    if api_key_file is not None:
        try:
            raw = api_key_file.read_bytes()
        except OSError as exc:
            raise unreadable_key_file(api_key_file, exc) from None
        # Saved by an editor with a byte-order mark, or as UTF-16 (PowerShell's `>`): the key
        # is the same ASCII text.
        utf16 = raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE))
        try:
            key = raw.decode("utf-16" if utf16 else "utf-8-sig").strip()
        except UnicodeDecodeError:
            raise ConfigError(
                f"--api-key-file {api_key_file} is not text (UTF-8): save the key as plain text"
            ) from None
        if not key:
            raise ConfigError(f"--api-key-file {api_key_file} is empty")
        return key
    from_env = os.environ.get("NEON_API_KEY")
    if from_env is not None and not from_env.strip():
        # Still "no API key" (exit 3), saying why: `NEON_API_KEY=$KEY` where $KEY is unset.
        raise AuthError(
            "no API key: NEON_API_KEY is set but empty: give it the key, or unset it and "
            "pass --api-key-file"
        )
    return (from_env or "").strip()


__all__ = [
    "DEFAULT_BASE_URL",
    "DataDir",
    "EnvOption",
    "ExitCode",
    "JsonFormatter",
    "TextFormatter",
    "api_options",
    "data_dir_option",
    "echo_error",
    "emit",
    "env_option",
    "existing_data_dir",
    "output_options",
    "read_key",
    "refuse_empty_variable",
    "require_dataset",
    "setup_logging",
    "storage_option_option",
]
