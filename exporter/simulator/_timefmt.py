"""Timestamps as the API writes them: whole seconds in bodies, microseconds in cursors."""

from __future__ import annotations

import re
from datetime import datetime, timezone

_EPOCH_ORDINAL = datetime(1970, 1, 1).toordinal()
_DAY_PREFIX: dict[int, str] = {}  # day number -> "YYYY-MM-DDT": rendering calls this per op
_CURSOR = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?(Z|[+-]\d{2}:\d{2})$"
)
US = 1_000_000


def _day_prefix(day: int) -> str:
    prefix = _DAY_PREFIX.get(day)
    if prefix is None:
        d = datetime.fromordinal(_EPOCH_ORDINAL + day)
        prefix = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T"
        _DAY_PREFIX[day] = prefix
    return prefix


def fmt_seconds(us: int) -> str:
    """Epoch microseconds -> "2025-01-16T21:02:04Z" (the fraction is cut, as bodies show it)."""
    s = us // US
    day, rem = divmod(s, 86400)
    hh, rem = divmod(rem, 3600)
    mm, ss = divmod(rem, 60)
    return f"{_day_prefix(day)}{hh:02d}:{mm:02d}:{ss:02d}Z"


def fmt_cursor(us: int) -> str:
    """Epoch microseconds -> "2022-12-09T08:47:52.20417Z": trailing zeros dropped, like Go's
    RFC3339Nano, which is where the variable digit count of real cursors comes from."""
    frac = us % US
    base = fmt_seconds(us)
    if not frac:
        return base
    return f"{base[:-1]}.{frac:06d}".rstrip("0") + "Z"


def fmt_fraction_offset(us: int, offset_minutes: int) -> str:
    """Epoch microseconds -> the same instant with its fraction and a numeric offset, e.g.
    "2025-01-16T23:00:08.000841+02:00": how the real API once rendered one operation's
    created_at among whole-second `Z` neighbours (PRODUCT.md, issue 9 finding 3)."""
    local = us + offset_minutes * 60 * US
    frac = local % US
    base = fmt_seconds(local)[:-1]
    if frac:
        base = f"{base}.{frac:06d}".rstrip("0")
    sign = "+" if offset_minutes >= 0 else "-"
    hh, mm = divmod(abs(offset_minutes), 60)
    return f"{base}{sign}{hh:02d}:{mm:02d}"


def parse_cursor_ns(text: str) -> int:
    """An RFC 3339 timestamp -> epoch nanoseconds; ValueError when malformed."""
    m = _CURSOR.match(text)
    if not m:
        raise ValueError(text)
    year, month, day, hh, mi, ss = (int(g) for g in m.groups()[:6])
    dt = datetime(year, month, day, hh, mi, ss, tzinfo=timezone.utc)
    offset = m.group(8)
    seconds = int(dt.timestamp())
    if offset != "Z":
        sign = 1 if offset[0] == "+" else -1
        seconds -= sign * (int(offset[1:3]) * 3600 + int(offset[4:6]) * 60)
    frac = (m.group(7) or "").ljust(9, "0")
    return seconds * 1_000_000_000 + int(frac)


def parse_seconds_us(text: str) -> int:
    """A body timestamp ("...Z", any fraction) -> epoch microseconds."""
    return parse_cursor_ns(text) // 1000
