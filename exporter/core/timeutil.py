"""RFC 3339 timestamps to exact UTC instants.

The API sends whole seconds with `Z` in bodies and microseconds in cursors (PRODUCT.md); we accept
any RFC 3339 form: a fraction of any length or none, `Z`/`z` or a numeric offset.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from exporter.core.errors import ConfigError

if TYPE_CHECKING:
    from collections.abc import Sequence

    import pyarrow as pa

_RFC3339 = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?([Zz]|[+-]\d{2}:?\d{2})?$"
)
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_NAIVE_EPOCH = datetime(1970, 1, 1)


def __getattr__(name: str) -> Any:
    # `UTC_US` (the Arrow type of every timestamp column) is built on first use: the state
    # database and the CLI import this module without paying ~50 MiB for pyarrow (start-up,
    # PRODUCT.md performance targets).
    if name == "UTC_US":
        import pyarrow as pa

        return pa.timestamp("us", tz="UTC")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `2h`, `7d`, `2w` as a timedelta; `ConfigError` otherwise. Here, not with
    `ops.check` which uses it too: sync's options parse durations without loading `check`."""
    m = _DURATION.match(text)
    if not m:
        raise ConfigError(f"{text!r} is not a duration: use a number and s, m, h, d or w (2h)")
    try:
        return timedelta(**{_UNITS[m[2]]: int(m[1])})
    except OverflowError as exc:  # over 999,999,999 days
        raise ConfigError(f"{text!r} is longer than any duration can be") from exc


def offset_problem(text: str) -> str | None:
    """Why the UTC offset ending a time someone typed cannot be (`+53:00` for `+05:30` moved a
    bound by two days, silently), or None; None for what is no RFC 3339 time at all (the
    caller's "not a time": `2025-01-3199` is no offset).

    A numeric offset's hours and minutes (RFC 3339: 00-23, 00-59): `parse_rfc3339` adds
    whatever they are (the API's own times are read as they come)."""
    parsed = _RFC3339.match(text.strip())
    offset = parsed[8] if parsed and parsed[8] not in (None, "Z", "z") else None
    if offset and (int(offset[1:3]) > 23 or int(offset[-2:]) > 59):
        return f"{text!r} has no such UTC offset: hours 00-23, minutes 00-59 (+05:30)"
    return None


def parse_rfc3339(text: str) -> datetime:
    """Parse one RFC 3339 timestamp to an aware UTC datetime (microsecond precision).

    Digits past the sixth of the fraction are truncated; a missing offset means UTC.
    """
    m = _RFC3339.match(text.strip())
    if not m:
        raise ValueError(f"not an RFC 3339 timestamp: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    frac = (m.group(7) or "")[:6].ljust(6, "0")
    dt = datetime(year, month, day, hour, minute, second, int(frac), tzinfo=timezone.utc)
    off = m.group(8)
    if off and off not in ("Z", "z"):
        sign = 1 if off[0] == "+" else -1
        digits = off[1:].replace(":", "")
        try:
            dt -= sign * timedelta(hours=int(digits[:2]), minutes=int(digits[2:]))
        except OverflowError:  # 9999-12-31T23:59:59-05:00 is in the year 10000
            raise ValueError(f"not an instant of the years 1 to 9999: {text!r}") from None
    return dt


def to_micros(text: str) -> int:
    """Microseconds since the Unix epoch of an RFC 3339 timestamp."""
    if (
        len(text) == 20
        and text[19] == "Z"
        and text[10] == "T"
        and text[4] == text[7] == "-"
        and text[13] == text[16] == ":"
        and text[11:13] < "24"  # newer Pythons read T24:00:00 as the next midnight
    ):
        # The API's usual form ("2025-01-16T21:02:04Z"): read by datetime's C parser, ~8x
        # faster than the pattern (an open operation's updated_at, per page; issue 24). Only
        # this exact shape: fromisoformat also reads forms RFC 3339 does not have (20250116T...).
        try:
            naive = datetime.fromisoformat(text[:19]) - _NAIVE_EPOCH
        except ValueError:
            pass  # not a date (a 13th month, a 60th second): the pattern says so below
        else:
            return (naive.days * 86400 + naive.seconds) * 1_000_000
    delta = parse_rfc3339(text) - _EPOCH
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def timestamps_array(values: Sequence[str | None]) -> pa.TimestampArray:
    """A column of RFC 3339 strings (or None) as `timestamp[us, UTC]`.

    Arrow's C parser handles the forms the API sends; anything it rejects falls back to
    `parse_rfc3339` per value, so an odd offset costs time, never correctness.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    utc_us = pa.timestamp("us", tz="UTC")
    strings = pa.array(values, type=pa.string())
    try:
        return pc.cast(strings, utc_us)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return pa.array([None if v is None else parse_rfc3339(v) for v in values], type=utc_us)
