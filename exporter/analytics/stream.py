"""The machine formats of `format.render` (json, jsonl, csv) written as the rows come: the same
text in pieces, one per batch of rows, so `opsaudit query` holds a batch, not the result."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import orjson

from exporter.analytics.format import STREAMED, jsonable, object_keys, text

__all__ = ["STREAMED", "render_batches"]

Rows = Sequence[Sequence[Any]]


def render_batches(columns: Sequence[str], batches: Iterable[Rows], fmt: str) -> Iterator[str]:
    """`render(columns, rows, fmt)` of the rows of every batch together, in pieces: joined, the
    same text, byte for byte. One piece per batch that has rows (a csv header or json's `[`
    with the first: nothing is produced before the first rows are read), and json's closing
    `]` (or `[]`) after the last; jsonl of no rows is no piece at all."""
    if fmt == "json":
        return _json(columns, batches)
    if fmt == "jsonl":
        return _jsonl(columns, batches)
    if fmt == "csv":
        return _csv(columns, batches)
    raise ValueError(f"{fmt!r} is not written in pieces; expected one of {', '.join(STREAMED)}")


def _objects(keys: list[str], rows: Rows) -> list[dict[str, Any]]:
    return [{c: jsonable(v) for c, v in zip(keys, row)} for row in rows]


def _json(columns: Sequence[str], batches: Iterable[Rows]) -> Iterator[str]:
    keys = object_keys(columns)
    opening = "[\n"
    for rows in batches:
        if not rows:
            continue
        # One array of the batch, indented as the whole one is: its objects without the
        # brackets' own lines ("[\n" and "\n]"), joined to the others' by ",\n".
        inner = orjson.dumps(_objects(keys, rows), option=orjson.OPT_INDENT_2)[2:-2]
        yield opening + inner.decode()
        opening = ",\n"
    yield "[]\n" if opening == "[\n" else "\n]\n"


def _jsonl(columns: Sequence[str], batches: Iterable[Rows]) -> Iterator[str]:
    keys = object_keys(columns)
    for rows in batches:
        if rows:
            lines = (
                orjson.dumps(o, option=orjson.OPT_APPEND_NEWLINE) for o in _objects(keys, rows)
            )
            yield b"".join(lines).decode()


def _csv(columns: Sequence[str], batches: Iterable[Rows]) -> Iterator[str]:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    for rows in batches:
        if rows:
            writer.writerows([text(v) for v in row] for row in rows)
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    if buffer.tell():  # no rows at all: the header alone
        yield buffer.getvalue()
