"""A report's window from the command line: `--since` and `--until` as durations back from
now, dates or RFC 3339 times."""

from __future__ import annotations

import datetime as dt
import re

from exporter.core.errors import ConfigError
from exporter.core.timeutil import offset_problem, parse_duration, parse_rfc3339

__all__ = ["parse_since", "parse_until"]

_RELATIVE = re.compile(r"^\s*\d+\s*[smhdw]\s*$")
_DATE = re.compile(r"^\s*\d{4}-\d{2}-\d{2}\s*$")
# A window's bounds lie before this (a report counts whole months from them; nothing is
# created in the year 9999).
_LAST = dt.datetime(9999, 1, 1, tzinfo=dt.timezone.utc)


def _parse_point(text: str, *, now: dt.datetime | None, end_of_day: bool) -> dt.datetime:
    point = _point(text, now=now, end_of_day=end_of_day)
    if point >= _LAST:
        raise ConfigError(f"{text!r} is past the year 9998: leave the bound out for none")
    return point


def _point(text: str, *, now: dt.datetime | None, end_of_day: bool) -> dt.datetime:
    now = now or dt.datetime.now(dt.timezone.utc)
    if _RELATIVE.match(text):
        try:
            return now - parse_duration(text)
        except OverflowError as exc:
            raise ConfigError(f"{text!r} is further back than any date") from exc
    if _DATE.match(text):
        try:
            day = dt.date.fromisoformat(text.strip())
        except ValueError as exc:
            raise ConfigError(f"{text!r} is not a valid date") from exc
        start = dt.datetime(day.year, day.month, day.day, tzinfo=dt.timezone.utc)
        if start >= _LAST:
            return start  # refused by the caller (the day after it may not exist)
        return start + dt.timedelta(days=1) if end_of_day else start
    problem = offset_problem(text)
    if problem is not None:
        raise ConfigError(problem)
    try:
        return parse_rfc3339(text)
    except ValueError as exc:
        raise ConfigError(
            f"{text!r} is not a time: use a duration back from now (7d, 24h, 30m, 2w), "
            "a date (2025-01-31) or an RFC 3339 time (2025-01-31T12:00:00Z)"
        ) from exc


def parse_since(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """`7d`/`24h`/`30m`/`2w` back from now, a date (its midnight UTC), or an RFC 3339 time."""
    return _parse_point(text, now=now, end_of_day=False)


def parse_until(text: str, *, now: dt.datetime | None = None) -> dt.datetime:
    """Like `parse_since`, but a date includes that whole day (the bound is exclusive)."""
    return _parse_point(text, now=now, end_of_day=True)
