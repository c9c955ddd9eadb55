"""The events' JSON Lines (issue 22, PRODUCT.md "Events"), byte for byte: Arrow builds them
column by column, with fields of few distinct values built once per combination and taken per
event (`exporter.events.render`); here each line is built object by object with `json.dumps`."""

from __future__ import annotations

import datetime as dt
import json
import random
from typing import Any

import pytest

STRINGS = ["id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"]
TIMESTAMPS = ["retry_at", "created_at", "updated_at", "observed_at"]
INTEGERS = ["failures_count", "total_duration_ms"]
NAMES = ["project_name", "branch_name", "endpoint_name"]
EPOCH = dt.datetime(1970, 1, 1)
LOWEST = -62_135_596_800_000_000  # 0001-01-01T00:00:00
HIGHEST = 253_402_300_799_999_999  # 9999-12-31T23:59:59.999999
TRICKY = [
    'a "quote"',
    "back\\slash",
    "new\nline",
    "every control " + "".join(map(chr, range(0x20))),
    "\x7f del, \u2028 line separator",
    "üñí € 😀",
    "/slash/",
    "",
]


def _text(rng: random.Random, tricky: float) -> str:
    if rng.random() < tricky:
        return rng.choice(TRICKY)
    return "".join(rng.choice("abcdef-0123") for _ in range(rng.randint(1, 12)))


def _micros(rng: random.Random, whole: float) -> int:
    value = rng.choice([LOWEST, HIGHEST, 0, -1, rng.randint(LOWEST, HIGHEST)])
    return value - value % 1_000_000 if rng.random() < whole else value


def _column(rng: random.Random, n: int, make: Any, distinct: int, nulls: float) -> list[Any]:
    """`n` values drawn from `distinct` made ones (many repeats: the grouped path; as many as
    rows: the per-event path), NULL at rate `nulls`."""
    pool = [make() for _ in range(distinct)]
    return [None if rng.random() < nulls else rng.choice(pool) for _ in range(n)]


def _rows(rng: random.Random, n: int) -> list[dict[str, Any]]:
    def distinct() -> int:
        return rng.choice([1, 2, 3, 5, 40, n])

    def nulls() -> float:
        return rng.choice([0.0, 0.0, 0.3, 1.0])

    tricky = rng.choice([0.0, 0.02, 0.5])
    whole = rng.choice([0.0, 1.0, 0.5])
    columns: dict[str, list[Any]] = {}
    for name in STRINGS[1:] + NAMES:
        columns[name] = _column(rng, n, lambda: _text(rng, tricky), distinct(), nulls())
    for name in TIMESTAMPS:
        columns[name] = _column(rng, n, lambda: _micros(rng, whole), distinct(), nulls())
    for name in INTEGERS:
        make = lambda: rng.choice([0, 1, -1, 2**63 - 1, -(2**63), rng.randint(0, 10**6)])  # noqa: E731
        columns[name] = _column(rng, n, make, distinct(), nulls())
    columns["version"] = _column(rng, n, lambda: rng.randint(1, 4), distinct(), 0.0)
    # The id: never NULL nor empty, no newline (the outbox keeps the ids newline-separated).
    ids = [_text(rng, tricky).replace("\n", " ") or "op" for _ in range(n)]
    columns["id"] = ids
    return [{name: values[i] for name, values in columns.items()} for i in range(n)]


def _rfc3339(micros: int | None) -> str | None:
    if micros is None:
        return None
    at = EPOCH + dt.timedelta(microseconds=micros)
    return at.isoformat(timespec="microseconds" if at.microsecond else "seconds") + "Z"


def _expected_line(row: dict[str, Any]) -> bytes:
    data = {name: row[name] for name in STRINGS[:6]}
    data |= {
        "failures_count": row["failures_count"],
        "error": row["error"],
        **{name: _rfc3339(row[name]) for name in TIMESTAMPS[:3]},
        "total_duration_ms": row["total_duration_ms"],
        "version": row["version"],
        **{name: row[name] for name in NAMES},
    }
    event = {
        "id": f"{row['id']}:{row['version']}",
        "type": "operation.created" if row["version"] == 1 else "operation.changed",
        "timestamp": _rfc3339(row["observed_at"]),
        "data": data,
    }
    return json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def _table(rows: list[dict[str, Any]]) -> Any:
    import pyarrow as pa

    types = {name: pa.string() for name in STRINGS} | {name: pa.int64() for name in INTEGERS}
    types |= {name: pa.timestamp("us", "UTC") for name in TIMESTAMPS} | {"version": pa.int32()}
    columns = {}
    for name, kind in types.items():
        values = [row[name] for row in rows]
        if name in TIMESTAMPS:
            columns[name] = pa.array(values, pa.int64()).cast(kind)
        else:
            columns[name] = pa.array(values, kind)
    return pa.table(columns)


@pytest.mark.parametrize("seed", range(12))
def test_event_lines_are_the_bytes_json_dumps_makes(seed: int) -> None:
    import pyarrow as pa

    from exporter.events.render import event_lines

    rng = random.Random(seed)
    n = rng.choice([1, 2, 7, 60, 2_000])
    rows = _rows(rng, n)
    table = _table(rows)
    projects = pa.array([row["project_name"] for row in rows], pa.string())
    branches = [row["branch_name"] for row in rows]
    endpoints = [row["endpoint_name"] for row in rows]
    # As the outbox passes them: one chunk, or a slice of a longer table.
    if seed % 3 == 0 and n > 1:
        table = pa.concat_tables([table.slice(0, n // 2), table.slice(n // 2)])
    ids, lines = event_lines(table, projects, branches, endpoints)
    expected = [_expected_line(row) for row in rows]
    assert lines.splitlines(keepends=True) == expected  # line by line: a failure shows which
    assert lines == b"".join(expected)
    assert ids.decode().split("\n") == [f"{row['id']}:{row['version']}" for row in rows]


def test_one_project_name_for_all_and_no_names_known() -> None:
    from exporter.events.render import event_lines

    rng = random.Random(99)
    rows = _rows(rng, 300)
    for row in rows:
        row |= {"project_name": 'prod "eu"', "branch_name": None, "endpoint_name": None}
    _, lines = event_lines(_table(rows), 'prod "eu"')
    assert lines == b"".join(_expected_line(row) for row in rows)
