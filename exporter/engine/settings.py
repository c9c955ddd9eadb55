"""The values a sync's settings may take: `sync()` refuses a `SyncConfig` the command line would
refuse (`ConfigError`, exit 2), before anything is written, and the command line's options share
the rules it has of its own (`--concurrency`'s range, `--max-requests`' least, an id's spaces).

Imports nothing heavy: the command line's option types call it while they parse.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, Protocol, TypeVar

from exporter.core.errors import ConfigError
from exporter.core.model import NAMES_REQUESTS
from exporter.core.pathcheck import plain_path

__all__ = [
    "LEAST_MAX_REQUESTS",
    "MAX_CONCURRENCY",
    "Settings",
    "check_settings",
    "id_problem",
    "max_requests_problem",
    "plain_values",
]

_C = TypeVar("_C")

MAX_CONCURRENCY = 64  # projects walked at once: 1 to this
# A page of the projects listing and one project's branches and endpoints listings.
LEAST_MAX_REQUESTS = 1 + NAMES_REQUESTS


class Settings(Protocol):
    """What `check_settings` reads of a `SyncConfig` (engine.sync imports this module)."""

    project_ids: list[str] | None
    org_ids: list[str] | None
    max_rps: float | None
    concurrency: int
    time_budget: float | None
    max_requests: int | None
    full_sweep_every: float
    refresh_open_every: float
    names_max_age: float
    route_max_rps: float
    commit_rows: int
    commit_seconds: float
    commit_chunks: int | None
    spill_rows: int | None
    commit_events: int
    max_gets_per_run: int | None


def max_requests_problem(value: int) -> str | None:
    """Why `value` cannot be --max-requests (None: it can): the run would list the projects and
    then refuse, recording a failed run."""
    if value < LEAST_MAX_REQUESTS:
        return (
            f"{value} does not cover a page of the projects listing and a project's branches "
            f"and endpoints listings: {LEAST_MAX_REQUESTS} or more"
        )
    return None


def id_problem(text: str) -> str | None:
    """Why `text` cannot be a project's or organization's id (None: it can): an empty one was
    tried, answered 404 and stayed in the state as a project with no id."""
    if not text.strip():
        return "an empty id; give the project's or organization's id"
    if text != text.strip():
        return f"{text!r} has spaces around it; ids have none"
    return None


def plain_values(config: _C) -> _C:
    """`config` (a dataclass) with what a notebook passes for a number or a path as the int,
    float or Path it stands for: numpy's int64 and float32 (a count read from a DataFrame), a
    Fraction; an `os.PathLike` that is not a `Path`. Such a count was refused ("commit_rows
    5000 is not an integer"), and taken it would reach orjson and SQLite, which take neither;
    such a path raised an AttributeError from deep inside."""
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(config):  # type: ignore[arg-type]
        value = getattr(config, f.name)
        if value is None or isinstance(value, (bool, str, Path)) or type(value) in (int, float):
            continue  # (numpy's float64 is a float, but its repr in a message is not 2.5)
        if isinstance(value, numbers.Integral):
            changes[f.name] = int(value)
        elif isinstance(value, numbers.Real):
            changes[f.name] = float(value)
        elif (path := plain_path(value)) is not value:
            changes[f.name] = path
    return dataclasses.replace(config, **changes) if changes else config  # type: ignore[type-var]


def check_settings(config: Settings) -> None:
    """`ConfigError` naming the option for the first value the command line refuses too."""
    for option, ids in (("--project", config.project_ids), ("--org-id", config.org_ids)):
        _check_ids(option, ids)
    # A notebook's "4" or timedelta(hours=1) raised a bare TypeError from a comparison below,
    # and 2.5 projects walked at once was taken.
    for option, value, integer, optional in (
        ("--max-rps", config.max_rps, False, True),
        ("--concurrency", config.concurrency, True, False),
        ("--time-budget", config.time_budget, False, True),
        ("--max-requests", config.max_requests, True, True),
        ("--full-sweep-every", config.full_sweep_every, False, False),
        ("--refresh-open-every", config.refresh_open_every, False, False),
        ("--names-max-age", config.names_max_age, False, False),
        ("--route-max-rps", config.route_max_rps, False, False),
        ("commit_seconds", config.commit_seconds, False, False),
    ):
        _check_number(option, value, integer=integer, optional=optional)
    _check_counts(config)
    rps = config.max_rps
    if rps is not None and not math.isfinite(rps):
        raise ConfigError(f"--max-rps {rps!r} is not a finite number")
    if rps is not None and rps < 0:
        raise ConfigError(f"--max-rps {rps!r} is not in the range x>=0 (0 or None: no pacing)")
    if not 1 <= config.concurrency <= MAX_CONCURRENCY:
        raise ConfigError(
            f"--concurrency {config.concurrency!r} is not in the range 1<=x<={MAX_CONCURRENCY}"
        )
    if config.max_requests is not None:
        problem = max_requests_problem(config.max_requests)
        if problem is not None:
            raise ConfigError(f"--max-requests {problem}")
    if not config.route_max_rps >= 1:  # 0: a ZeroDivisionError once the run was recorded
        raise ConfigError(f"--route-max-rps {config.route_max_rps!r} is not 1 or more")
    if config.time_budget is not None:
        _check_seconds("--time-budget", config.time_budget, zero=False)
    _check_seconds("--full-sweep-every", config.full_sweep_every, zero=False)
    _check_seconds("--refresh-open-every", config.refresh_open_every, zero=True)
    _check_seconds("--names-max-age", config.names_max_age, zero=True)


def _check_number(option: str, value: object, *, integer: bool, optional: bool) -> None:
    """`value` is an int (or, unless `integer`, a float; with `optional`, None), not a bool."""
    if value is None and optional:
        return
    kinds: tuple[type, ...] = (int,) if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds):
        what = "an integer" if integer else "a number (seconds, for a duration)"
        raise ConfigError(f"{option} {value!r} is not {what}")


def _check_counts(config: Settings) -> None:
    """The library's own counts (no option sets them): max_gets_per_run=-1 (as "no bound"
    elsewhere) read no open operation at all, commit_rows=-1 committed every chunk alone."""
    for name, value, least, none in (
        ("commit_rows", config.commit_rows, 1, None),
        ("commit_chunks", config.commit_chunks, 1, "no bound"),
        ("spill_rows", config.spill_rows, 1, "never ahead"),
        ("commit_events", config.commit_events, 1, None),
        ("max_gets_per_run", config.max_gets_per_run, 0, "no bound"),
    ):
        _check_number(name, value, integer=True, optional=none is not None)
        if value is not None and value < least:
            also = f" (None: {none})" if none else ""
            raise ConfigError(f"{name} {value!r} is not {least} or more{also}")


def _check_ids(option: str, ids: Sequence[str] | None) -> None:
    if ids is None:
        return
    if isinstance(ids, str):  # iterated, "abc" was the projects 'a', 'b' and 'c'
        raise ConfigError(f"{option} ids are a list of strings, not the string {ids!r}")
    if not isinstance(ids, Collection):
        # An iterator (a generator, map()) was used up here: the run then synced nothing, ok.
        raise ConfigError(f"{option} ids are a list of strings, not {type(ids).__name__}")
    if not ids:
        # None syncs every project; an empty list (a task's filter that matched nothing)
        # synced them all too.
        raise ConfigError(f"{option}: no ids; give None for every project the key reaches")
    for pid in ids:
        problem = id_problem(pid) if isinstance(pid, str) else f"{pid!r} is not a string"
        if problem is not None:
            raise ConfigError(f"{option} {problem}")


def _check_seconds(option: str, seconds: float, *, zero: bool) -> None:
    """A duration in seconds: finite, and above 0 (or, with `zero`, 0 or more)."""
    if not math.isfinite(seconds) or seconds < 0:
        least = "0 or more" if zero else "above 0"
        raise ConfigError(f"{option} {seconds!r} is not a duration: give {least} seconds")
    if not seconds and not zero:
        raise ConfigError(
            f"{option} {seconds!r} is no time at all: give a duration above 0 (in seconds)"
        )
