"""Rendering query results (column names + rows) as a table, JSON, JSON lines, CSV or Markdown."""

from __future__ import annotations

import csv
import datetime as dt
import decimal
import io
import json
import math
import unicodedata
import uuid
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from exporter.core.errors import check_type, escape_controls

__all__ = [
    "FORMATS",
    "SECTIONS",
    "STREAMED",
    "branch_failure_line",
    "branch_label",
    "format_duration",
    "json_bytes",
    "jsonable",
    "readable_interval",
    "render",
    "text",
]

FORMATS = ("table", "json", "jsonl", "csv", "markdown")
# The formats `opsaudit query` writes as the rows are read (`analytics.stream`); table and
# markdown need every row first (column widths, decimals).
STREAMED = ("json", "jsonl", "csv")

# The tables of the report, as `--section` names them (here, not in the report: the CLI
# builds its options from these without importing DuckDB).
SECTIONS = (
    "freshness",
    "failing",
    "stuck",
    "errors",
    "projects",
    "branches",
    "failures",
    "durations",
    "action_mix",
)

# A terminal cell longer than this is cut (error texts, raw JSON); json/csv are never cut.
MAX_CELL = 60


def _timestamp(value: dt.datetime) -> str:
    if value.tzinfo is None:  # TIMESTAMP without time zone: no instant, so no "Z" either
        return value.isoformat()
    return value.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat() + "Z"


def _interval(value: dt.timedelta) -> str:
    """ISO 8601 duration in seconds (PT90S, -PT0.5S): exact, and parseable everywhere."""
    if not value.microseconds:  # whole seconds (the report's ages): the same text, in integers
        whole = value.days * 86400 + value.seconds
        return f"-PT{-whole}S" if whole < 0 else f"PT{whole}S"
    seconds = value / dt.timedelta(seconds=1)
    sign = "-" if seconds < 0 else ""
    number = f"{abs(seconds):.6f}".rstrip("0").rstrip(".")
    return f"{sign}PT{number}S"


def readable_interval(value: dt.timedelta) -> str:
    """An interval as DuckDB prints one, for people: `30 days 00:51:52`, `00:00:01.5`."""
    sign = "-" if value < dt.timedelta(0) else ""
    value = abs(value)
    hours, rest = divmod(value.seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if value.microseconds:
        clock += f".{value.microseconds:06d}".rstrip("0")
    if value.days:
        clock = f"{value.days} day{'' if value.days == 1 else 's'} {clock}"
    return sign + clock


def branch_label(name: str | None, branch_id: str, *, deleted: bool = False) -> str:
    """A branch by name, id beside it (names, not ids): "`preview/pr-42` (br-...)", with
    ", deleted" once a listing of its project no longer has it; the bare id for a branch never
    listed (nothing better is known)."""
    if name is None:
        return branch_id + (" (deleted)" if deleted else "")
    return f"`{name}` ({branch_id}{', deleted' if deleted else ''})"


def branch_failure_line(
    action: str, failed: int, name: str | None, branch_id: str, *, deleted: bool = False
) -> str:
    """ "start_compute failed 4 times on `preview/pr-42` (br-...)": the report's and check's
    one wording for where failures come from."""
    times = "once" if failed == 1 else f"{failed:,} times"
    return f"{action} failed {times} on {branch_label(name, branch_id, deleted=deleted)}"


def _non_finite(value: float) -> str:
    """inf, -inf or nan: what they are (JSON has no such numbers, so json says null)."""
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


_INT64_MIN, _UINT64_MAX = -(2**63), 2**64 - 1


class JsonText(str):
    """A value of DuckDB's JSON type (the driver hands it over as its text): JSON output
    carries it as JSON, not as a string holding JSON (`raw::JSON`, `json_object(...)`); text
    output prints the text."""

    __slots__ = ()


def jsonable(value: Any) -> Any:
    """A value JSON can carry: timestamps ISO 8601 UTC with Z, dates ISO, decimals as numbers
    (exact: one a float cannot hold is an `orjson.Fragment` of its digits)."""
    if type(value) is JsonText:
        return _json_value(value)
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        # orjson writes 64 bits at most; a HUGEINT (a BIGINT column's sum) as its exact digits.
        return value if _INT64_MIN <= value <= _UINT64_MAX else orjson.Fragment(str(value))
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime):
        return _timestamp(value)
    if isinstance(value, (dt.date, dt.time)):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return _interval(value)
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return None  # as a float's nan and inf
        if value == value.to_integral_value():
            return jsonable(int(value))  # (a DECIMAL(38, 0) may be past 64 bits)
        number = float(value)
        # A float holds 15-17 significant digits, a DECIMAL(38, 2) more: written as its exact
        # digits then (a JSON number has no precision of its own; 1.2345678901234568e+16 was
        # printed for 12345678901234567.89).
        exact = decimal.Decimal(repr(number)) == value
        return number if exact else orjson.Fragment(format(value, "f"))
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, dict):  # a MAP: its keys as JSON writes them (timestamps ISO too)
        return {_json_key(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return str(value)


def _json_value(value: JsonText) -> Any:
    """A JSON value's text as JSON output carries it: parsed and written again, compact (its
    newlines would split a JSON Lines record), NaN and Infinity, which DuckDB writes into
    JSON, as null (as a float's), numbers exact; text that does not parse stays text."""
    try:
        parsed = json.loads(value, parse_float=decimal.Decimal, parse_constant=float)
    except ValueError:
        return str.__str__(value)
    return jsonable(parsed)


def _json_key(key: Any) -> str:
    value = jsonable(key)
    return value if isinstance(value, str) else orjson.dumps(value).decode()


# orjson writes str, int, bool, None, floats (a non-finite one as null, as `jsonable` says),
# lists, tuples, dicts and UUIDs as `jsonable` leaves them; every other value (datetimes,
# intervals, decimals, bytes, dataclasses) goes through `jsonable` itself.
_JSON_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def json_bytes(value: Any, *, indent: bool = False, newline: bool = False) -> bytes:
    """`orjson.dumps(jsonable(value))`, byte for byte, without building the converted copy:
    only the values orjson does not write as `jsonable` would are converted (a report's
    hundreds of thousands of rows are otherwise walked twice in Python); `newline`: "\n" after."""
    option = _JSON_OPTIONS | (orjson.OPT_INDENT_2 if indent else 0)
    option |= orjson.OPT_APPEND_NEWLINE if newline else 0
    try:
        return orjson.dumps(value, default=jsonable, option=option)
    except orjson.JSONEncodeError:
        # An integer past 64 bits, which orjson refuses before asking `default`: the
        # converted copy writes it as its digits.
        return orjson.dumps(jsonable(value), option=option)


def text(value: Any) -> str:
    """One value as plain text (CSV and tables): NULL is empty, numbers exact."""
    if value is None:
        return ""
    if isinstance(value, str):
        return str.__str__(value)  # a JsonText too: its text
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float) and not math.isfinite(value):
        return _non_finite(value)
    if isinstance(value, (dict, list, tuple)):
        return orjson.dumps(jsonable(value)).decode()
    if isinstance(value, decimal.Decimal):
        if not value.is_finite():
            return _non_finite(float(value))
        converted = jsonable(value)
        return format(value, "f") if isinstance(converted, orjson.Fragment) else str(converted)
    converted = jsonable(value)
    return converted if isinstance(converted, str) else str(converted)


def _decimals(value: Any) -> int | None:
    """Decimals a finite float needs on a terminal (at most 3); None for anything else."""
    if isinstance(value, float) and math.isfinite(value):
        out = f"{value:.3f}".rstrip("0")
        return len(out) - out.index(".") - 1
    return None


def _column_decimals(rows: Sequence[Sequence[Any]], i: int) -> int:
    """One number of decimals per column, so its figures line up (0.500 above 0.167)."""
    return max((d for row in rows if (d := _decimals(row[i])) is not None), default=0)


def _cell(value: Any, decimals: int = 3, thousands: bool = False, cut: bool = True) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, float) and math.isfinite(value):
        if value and not 10.0**-decimals / 2 <= abs(value) < 1e15:
            # Too small for the column's decimals (0.00004 printed 0) or too large for fixed
            # digits (1e300 printed 301 of them): its own significant digits, exactly.
            return repr(value)
        # At most three decimals on a terminal (ms percentiles, shares); json keeps all.
        out = f"{value:,.{decimals}f}" if thousands else f"{value:.{decimals}f}"
        return out[1:] if out.startswith("-") and not out.strip("-0.,") else out  # no "-0"
    if thousands and isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    if isinstance(value, dt.timedelta):
        return readable_interval(value)
    out = " ".join(text(value).split())  # newlines and tabs would break the alignment
    out = escape_controls(out)  # on a terminal and in Markdown (core.errors)
    return out if not cut or len(out) <= MAX_CELL else out[: MAX_CELL - 1] + "…"


def _width(value: str) -> int:
    """Columns a terminal gives the text: a wide (CJK) character two, a mark none (`len`
    misaligned every column right of a name in Japanese)."""
    if value.isascii():
        return len(value)
    return sum(_char_width(c) for c in value)


def _char_width(c: str) -> int:
    # No column: a nonspacing or enclosing mark, of a combining class or not (a Thai or
    # Devanagari vowel sign is class 0: `combining` said one), a format character (a zero-width
    # space or joiner) but the soft hyphen, a Hangul syllable's vowel or final consonant jamo.
    kind = unicodedata.category(c)
    if kind in ("Mn", "Me") or (kind == "Cf" and c != "\u00ad") or "\u1160" <= c <= "\u11ff":
        return 0
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1


def _pad(value: str, width: int, right: bool) -> str:
    fill = " " * max(0, width - _width(value))
    return fill + value if right else value + fill


def _headings(columns: Sequence[str]) -> list[str]:
    """Column names as their values are shown: a PIVOT makes the data's values the names."""
    return [_cell(c, cut=False) for c in columns]


def _numeric(value: Any) -> bool:
    return isinstance(value, (int, float, decimal.Decimal)) and not isinstance(value, bool)


def _cells(
    rows: Sequence[Sequence[Any]], width: int, thousands: bool, cut: bool = True
) -> list[list[str]]:
    """`cut`: long text cut to MAX_CELL (a terminal's table; markdown is a file: whole)."""
    decimals = [_column_decimals(rows, i) for i in range(width)]
    return [[_cell(v, d, thousands, cut) for v, d in zip(row, decimals)] for row in rows]


def _table(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    max_rows: int | None = None,
    thousands: bool = False,
    total: int | None = None,
) -> str:
    total = len(rows) if total is None else total
    if max_rows is not None and len(rows) > max_rows:
        rows = rows[:max_rows]
    hidden = total - len(rows)
    cells = _cells(rows, len(columns), thousands)
    columns = _headings(columns)
    widths = [_width(c) for c in columns]
    for row in cells:
        widths = [max(w, _width(c)) for w, c in zip(widths, row)]
    right = [any(_numeric(row[i]) for row in rows) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        parts = [_pad(v, w, r) for v, w, r in zip(values, widths, right, strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(columns), "  ".join("-" * w for w in widths)]
    out += [line(row) for row in cells]
    if hidden:
        out.append(f"({total:,} rows, {hidden:,} more rows not shown: --max-rows 0 shows all)")
    else:
        out.append(f"({total:,} row{'' if total == 1 else 's'})")
    return "\n".join(out) + "\n"


def _markdown(
    columns: Sequence[str], rows: Sequence[Sequence[Any]], thousands: bool = False
) -> str:
    def escape(value: str) -> str:
        return value.replace("|", "\\|")

    right = [any(_numeric(row[i]) for row in rows) for i in range(len(columns))]
    out = ["| " + " | ".join(escape(c) for c in _headings(columns)) + " |"]
    out.append("|" + "|".join("---:" if r else "---" for r in right) + "|")
    for row in _cells(rows, len(columns), thousands, cut=False):
        out.append("| " + " | ".join(escape(c) for c in row) + " |")
    return "\n".join(out) + "\n"


def _csv(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows([text(v) for v in row] for row in rows)
    return buffer.getvalue()


def object_keys(columns: Sequence[str]) -> list[str]:
    """The columns as keys of one JSON object: a name met again (`SELECT *` of a join: `id`
    twice) becomes `id_1`, `id_2`, ... (DuckDB's own spelling, skipping names the result has),
    where a dict would keep only the last column's value under it, silently."""
    taken = set(columns)
    keys: list[str] = []
    used: set[str] = set()
    for name in columns:
        key, n = name, 0
        while key in used:
            n += 1
            key = f"{name}_{n}"
            if key in taken:
                key = name  # another column's own name: try the next number
        used.add(key)
        keys.append(key)
    return keys


def _json(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    keys = object_keys(columns)
    objects = [{c: jsonable(v) for c, v in zip(keys, row)} for row in rows]
    return orjson.dumps(objects, option=orjson.OPT_INDENT_2).decode() + "\n"


def _jsonl(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON object per line, for jq and log shippers (nothing at all for no rows)."""
    keys = object_keys(columns)
    return "".join(
        orjson.dumps({c: jsonable(v) for c, v in zip(keys, row)}).decode() + "\n" for row in rows
    )


def render(
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    fmt: str,
    *,
    max_rows: int | None = None,
    thousands: bool = False,
    total: int | None = None,
) -> str:
    """The rows in `fmt` (one of FORMATS), ending with a newline (jsonl of no rows: "").

    `max_rows` cuts the table format only, with a last line saying how many more there are
    (`total`: how many rows there are when `rows` holds only the first ones, the others
    counted as they were read); the machine formats always carry every row. In table and markdown, each float column has
    one number of decimals; `thousands` adds separators (1,988) there too."""
    # None: "'NoneType' object is not iterable" from deep inside. Any iterable else, as before
    # the check: a DataFrame's `columns` (an Index) and `to_numpy()` rows are no Sequence.
    check_type("columns", columns, Iterable, "a sequence of column names", but=(str, bytes))
    check_type("rows", rows, Iterable, "a sequence of rows (con.execute(sql).fetchall())")
    columns = columns if isinstance(columns, Sequence) else list(columns)
    rows = rows if isinstance(rows, Sequence) else list(rows)  # (an iterator: the table's len)
    if fmt == "table":
        return _table(columns, rows, max_rows, thousands, total)
    if fmt == "json":
        return _json(columns, rows)
    if fmt == "jsonl":
        return _jsonl(columns, rows)
    if fmt == "csv":
        return _csv(columns, rows)
    if fmt == "markdown":
        return _markdown(columns, rows, thousands)
    raise ValueError(f"unknown format {fmt!r}; expected one of {', '.join(FORMATS)}")


def format_duration(delta: dt.timedelta) -> str:
    """A short human duration: `3d 4h`, `2h 5m`, `40m`, `12s`."""
    seconds = max(0, int(delta.total_seconds()))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h" if hours else f"{days}d"
    if hours:
        return f"{hours}h {minutes}m" if minutes else f"{hours}h"
    if minutes:
        return f"{minutes}m"
    return f"{secs}s"
