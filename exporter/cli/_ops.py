"""`opsaudit check` and `opsaudit doctor`: is the audit trail healthy, and is the set-up right?"""

from __future__ import annotations

import datetime as dt
import math
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import click

from exporter.cli._common import (
    api_options,
    data_dir_option,
    emit,
    output_options,
    read_key,
    storage_option_option,
)
from exporter.cli._group import short_help
from exporter.cli._metrics import metrics_file_option, write_metrics_file, write_unjudged_check
from exporter.core.errors import AuthError, ConfigError, ExitCode, KeyFileError, NoDatasetError


class Duration(click.ParamType):
    """`90s`, `30m`, `2h`, `7d`, `2w`: a bad value is a usage error naming the option."""

    name = "duration"

    def __init__(self, zero: bool = False) -> None:
        # Whether no time at all is a value (--refresh-open-every 0: every run), a bare `0`
        # included; otherwise `0s` is refused as `0` is (--time-budget 0s synced nothing, every
        # run, exit 0).
        self.zero = zero

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, dt.timedelta):
            return value
        from exporter.core.timeutil import parse_duration  # not ops.check: sync never loads it

        try:
            duration = dt.timedelta(0) if str(value).strip() == "0" else parse_duration(str(value))
        except ConfigError as exc:
            self.fail(str(exc), param, ctx)
        if not duration and not self.zero:
            self.fail(f"{value!r} is no time at all: give a duration above 0 (90s, 2h)", param, ctx)
        return duration


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange without `inf` and `nan`, which it lets through (nan compares false
    with every bound): `--max-rps nan` turned pacing off, `--clock-offset nan` was a ValueError
    reported as a bug (exit 5)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


def _thresholds(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> list[Any]:
    from exporter.ops.check import parse_threshold

    try:
        return [parse_threshold(v) for v in values]
    except ConfigError as exc:
        raise click.BadParameter(str(exc).removeprefix("--fail-on "), ctx, param) from None


def _as_of(ctx: click.Context, param: click.Parameter, value: str | None) -> dt.datetime | None:
    if value is None:
        return None
    from exporter.core.timeutil import offset_problem, parse_rfc3339

    problem = offset_problem(value)
    if problem is not None:
        raise click.BadParameter(problem, ctx, param)
    try:
        as_of = parse_rfc3339(value)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not an RFC 3339 time (2025-01-31T12:00:00Z)", ctx, param
        ) from None
    if not _AS_OF_YEARS[0] <= as_of.year <= _AS_OF_YEARS[1]:  # (parse_rfc3339 gives UTC)
        # The windows reach back from it: year 1 less a day is no date (exit 5, "a bug").
        raise click.BadParameter(
            f"{value!r} is outside the years {_AS_OF_YEARS[0]} to {_AS_OF_YEARS[1]}", ctx, param
        )
    return as_of


_AS_OF_YEARS = (1970, 9998)


class CheckCommand(click.Command):
    """`check`, whose every end but a verdict leaves `--metrics-file` saying not ok (README's
    alert on `opsaudit_check_ok == 0`): a usage error met while its options are read (a bad
    --fail-on: the body never ran, `opsaudit_check_ok 1` stood), and any error of the body."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        given = list(args)
        try:
            return super().parse_args(ctx, args)
        except click.exceptions.Exit:
            raise  # --help
        except Exception:
            self._unjudged(ctx, given)
            raise

    def not_run(self, parent: click.Context, args: list[str]) -> None:
        """The group failed before check's options were parsed (`_group.not_run`): its own
        `args` name the file, read here as when they are refused."""
        self._unjudged(click.Context(self, info_name=self.name, parent=parent), args)

    def _unjudged(self, ctx: click.Context, given: list[str]) -> None:
        path = self._readable(ctx, given, "metrics_file")
        if path is not None:  # (a refused --metrics-file names no file to write)
            write_unjudged_check(path, self._readable(ctx, given, "as_of"))

    def invoke(self, ctx: click.Context) -> Any:
        previous = _terminate_by_exit()
        try:
            return super().invoke(ctx)
        except BaseException as exc:
            verdict = isinstance(exc, SystemExit) and exc.code == int(ExitCode.ATTENTION)
            if not verdict and ctx.params.get("metrics_file") is not None:
                write_unjudged_check(ctx.params["metrics_file"], ctx.params.get("as_of"))
            raise
        finally:
            if previous is not None:
                signal.signal(signal.SIGTERM, previous)

    def _readable(self, ctx: click.Context, given: list[str], name: str) -> Any:
        """Option `name`'s value in `given` whatever the others hold; None when it has none or
        is refused itself."""
        parser = self.make_parser(ctx)
        parser.ignore_unknown_options = True  # `--no-such-option` is what failed
        [param] = [p for p in self.params if p.name == name]
        try:
            opts, _, _ = parser.parse_args(list(given))
            value, _ = param.handle_parse_result(ctx, opts, [])
        except Exception:
            return None
        return value if isinstance(value, (Path, dt.datetime)) else None


def _terminate_by_exit() -> Any:
    """SIGTERM (`timeout` in cron, `systemctl stop`) raised in check as an exit 143, not the
    default's death on the spot: the metrics file then says not ok, as after a Ctrl-C, instead
    of keeping the last verdict. The handler it replaced (None off the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminated(signum: int, frame: Any) -> None:
        os.write(2, b"Terminated.\n")  # not click: the main thread may be mid-print
        raise SystemExit(int(ExitCode.TERMINATED))

    return signal.signal(signal.SIGTERM, terminated)


@click.command("check", cls=CheckCommand, short_help=short_help("check"))
@data_dir_option
@storage_option_option
@click.option(
    "--max-age",
    type=Duration(),
    default="2h",
    show_default=True,
    help="A finding when the last successful sync, or a project's, is older than this.",
)
@click.option(
    "--reread-max-age",
    type=Duration(),
    help="A finding when an open operation has not been re-read for longer than this "
    "(default: the last sync's --refresh-open-every plus 1h; 24h when that is 0).",
)
@click.option(
    "--stuck-after",
    type=Duration(),
    default="1h",
    show_default=True,
    help="What `stuck` counts: operations not terminal this long after their creation.",
)
@click.option(
    "--fail-on",
    "thresholds",
    multiple=True,
    metavar="EXPR",
    callback=_thresholds,
    help="A finding when the data crosses a threshold (repeatable): "
    "'failure_rate(ACTION) > 5% over 24h' (ACTION optional: all actions), 'stuck > 0', "
    "'stuck(ACTION) > 0 over 24h' (only those created in the last 24h: the alert clears). An "
    "unknown ACTION is a usage error.",
)
@click.option(
    "--as-of",
    metavar="TIME",
    callback=_as_of,
    help="Judge as of this RFC 3339 time instead of now (to replay a check).",
)
@output_options(["text", "json"], help="text: one line per finding; json: one object.")
@metrics_file_option
def check_command(
    data_dir: Path | str,
    storage_options: tuple[str, ...],
    max_age: dt.timedelta,
    reread_max_age: dt.timedelta | None,
    stuck_after: dt.timedelta,
    thresholds: list[Any],
    as_of: dt.datetime | None,
    fmt: str,
    output: Path | None,
    metrics_file: Path | None,
) -> None:
    """Exit 8 with one line per finding when the audit trail needs attention.

    Findings: the last successful sync older than --max-age; the last run ended partial,
    failed, auth_failed or killed; a project not synced for --max-age or whose last sync
    failed; open operations not re-read for --reread-max-age; gaps longer than the platform's
    retention (about 6 months); the --fail-on thresholds.
    Meant for cron (`opsaudit sync; opsaudit check`), Nagios-style checks and CI.
    """
    from exporter.ops.check import CheckReport, no_sync_yet, run_check
    from exporter.store.readers import reading

    # On object storage: the restored state and the tables' snapshots (no lease, no writes).
    try:
        with reading(data_dir, storage_options) as local:
            report = run_check(
                local,
                max_age=max_age,
                reread_max_age=reread_max_age,
                stuck_after=stuck_after,
                thresholds=thresholds,
                as_of=as_of,
            )
    except NoDatasetError:  # an empty prefix: as an empty local directory is (exit 8)
        report = CheckReport(as_of or dt.datetime.now(dt.timezone.utc), [no_sync_yet(data_dir)])
    # Could not judge (exit 2, 5, 6): CheckCommand writes `opsaudit_check_ok 0`.
    if fmt == "json":
        import orjson

        text = orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = "".join(line + "\n" for line in report.lines())
    emit(text, output)
    if metrics_file is not None:
        from exporter.ops.metrics import check_metrics

        write_metrics_file(
            metrics_file,
            data_dir,
            storage_options,
            extra=check_metrics(report),
            as_of=report.as_of,
        )
    if not report.ok:
        sys.exit(int(ExitCode.ATTENTION))


@click.command("doctor", short_help=short_help("doctor"))
@data_dir_option
@storage_option_option
@api_options
@output_options(["text", "json"], help="text: one line per check; json: one object.")
def doctor_command(
    data_dir: Path | str,
    storage_options: tuple[str, ...],
    api_key_file: Path | None,
    base_url: str,
    fmt: str,
    output: Path | None,
) -> None:
    """Check the set-up (key, API, data directory, lock, state, disk) and say what to fix.

    Checks the key (its kind and the organizations it sees; never the key itself), the base URL
    and TLS, discovery of the projects, a data directory that is writable and lockable, the
    lock, the state file, the free disk space, the last runs and the data files (their Parquet
    footers). On object storage (s3://, gs://, az://): the storage, readable with the
    environment's credentials (a missing bucket, no or refused credentials, an unreachable
    endpoint), the lease (who holds it, expired), each table's Delta log, the state object and
    the last runs; doctor only reads there (it takes no lease and writes no object), so write
    access is proven by the first sync. One line per check, each
    problem with its fix. Exit 8 when a check says error (a sync would fail, miss projects or
    miss operations), 0 otherwise: warnings (no sync yet, a last run that was not ok, plain
    http) do not fail it.
    """
    from exporter.ops.doctor import run_doctor

    try:
        key, key_error, key_fix = read_key(api_key_file), None, None
    except KeyFileError as exc:  # the key given for its file's path: problem, then fix
        key, key_error, key_fix = None, exc.problem, exc.fix
    except ConfigError as exc:
        key, key_error, key_fix = None, str(exc), None
    except AuthError as exc:  # NEON_API_KEY set but empty: "no API key", then what to do
        key, (key_error, _, key_fix) = None, str(exc).partition(": ")
    report = run_doctor(
        data_dir,
        api_key=key,
        base_url=base_url,
        key_error=key_error,
        key_fix=key_fix,
        storage_options=storage_options,
    )
    if fmt == "json":
        import orjson

        text = orjson.dumps(report.as_dict(), option=orjson.OPT_INDENT_2).decode() + "\n"
    else:
        text = "".join(f.line() + "\n" for f in report.findings)
    emit(text, output)
    if not report.ok:
        sys.exit(int(ExitCode.ATTENTION))
