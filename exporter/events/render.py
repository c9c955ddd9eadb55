"""The events' JSON (issue 22, PRODUCT.md "Events"), built from a versions table by Arrow column
by column, not object by object in Python: a fraction of the CPU per event (bench/README.md)."""

from __future__ import annotations

from typing import Any, TypeAlias

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["COLUMNS", "event_ids", "event_lines", "event_lines_buffer"]

_TIMESTAMPS = ("retry_at", "created_at", "updated_at", "observed_at")
# An event's `data`: the operation_versions columns that carry the API's fields, and `version`.
_DATA_FIELDS = (
    "id",
    "project_id",
    "branch_id",
    "endpoint_id",
    "action",
    "status",
    "failures_count",
    "error",
    "retry_at",
    "created_at",
    "updated_at",
    "total_duration_ms",
    "version",
)
COLUMNS = [*_DATA_FIELDS, "observed_at"]  # what an event is made of


def _rfc3339(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """UTC timestamps as RFC 3339 text without the final `Z`: whole seconds as `...:04`, else
    `...:04.214837`. Cast as naive timestamps (the values are UTC): Arrow formats a zoned one
    ~100 times slower, which was most of the cost of recording an event."""
    naive = column.cast(pa.int64()).cast(pa.timestamp("us"))
    text = pc.replace_substring(pc.cast(naive, pa.string()), " ", "T", max_replacements=1)
    return pc.replace_substring(text, ".000000", "")


_STRINGS = frozenset({"id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"})

# A part of an event's line: literal text, or one value per event (joined by Arrow).
Part: TypeAlias = str | pa.Array | pa.ChunkedArray


def _quoted(text: pa.ChunkedArray | pa.Array) -> list[Part]:
    """Each value in double quotes, NULL as `null` (values that need no escaping). Without a
    NULL the quotes are literal parts, which the line's one join adds for free."""
    if text.null_count == 0:
        return ['"', text, '"']
    quoted = pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")
    return [pc.fill_null(quoted, "null")]


_ESCAPED = b'"\\' + bytes(range(0x20))  # what a JSON string literal cannot hold as is


def _plain(column: pa.ChunkedArray | pa.Array) -> bool:
    """No value needs escaping (ids, actions, names: almost always): the values' bytes, those
    JSON escapes deleted (one pass of `bytes.translate`), keep their length. A regex per value
    cost ~8 times as much. Bytes under a NULL count too: at worst a needless escape pass."""
    chunks = column.chunks if isinstance(column, pa.ChunkedArray) else [column]
    for chunk in chunks:
        if not pa.types.is_string(chunk.type):
            return not pc.any(pc.match_substring_regex(chunk, '["\\\\\\x00-\\x1f]')).as_py()
        data = _values(chunk).to_pybytes()
        if len(data.translate(None, _ESCAPED)) != len(data):
            return False
    return True


def _json_strings(column: pa.ChunkedArray | pa.Array, plain: bool | None = None) -> list[Part]:
    """Each value as a JSON string literal (`"..."`), NULL as `null`, computed by Arrow.
    `plain`: whether `_plain(column)`, when known."""
    if _plain(column) if plain is None else plain:
        return _quoted(column)
    text = pc.replace_substring(column, "\\", "\\\\")
    text = pc.replace_substring(text, '"', '\\"')
    controls = pc.fill_null(pc.match_substring_regex(column, "[\\x00-\\x1f]"), False)
    if pc.any(controls).as_py():
        # Rare (an error text with a newline): those values through the JSON encoder.
        exact = [
            _ENCODER.encode(v).decode()[1:-1] if flag and v is not None else None
            for v, flag in zip(column.to_pylist(), controls.to_pylist())
        ]
        text = pc.if_else(controls, pa.array(exact, pa.string()), text)
    return _quoted(text)


def _json_values(table: pa.Table, name: str, plain_ids: bool) -> list[Part]:
    if name in _STRINGS:
        return _json_strings(table[name], plain_ids if name == "id" else None)
    if name in _TIMESTAMPS:
        return _timestamps(table[name])
    text = pc.cast(table[name], pa.string())  # integers
    return [text if text.null_count == 0 else pc.fill_null(text, "null")]


def _timestamps(column: pa.ChunkedArray | pa.Array) -> list[Part]:
    """RFC 3339 in quotes, NULL as `null` (the text needs no escaping)."""
    text = _rfc3339(column)
    if text.null_count == 0:
        return ['"', text, 'Z"']
    return _quoted(pc.binary_join_element_wise(text, pa.scalar("Z"), ""))


_ENCODER = msgspec.json.Encoder()


def event_lines(
    table: pa.Table,
    project_names: pa.Array | str | None,
    branch_names: list[str | None] | None = None,
    endpoint_names: list[str | None] | None = None,
) -> tuple[bytes, bytes]:
    """The event ids (newline-separated) and the events' JSON Lines (`event_lines_buffer`)."""
    lines = event_lines_buffer(table, project_names, branch_names, endpoint_names)
    return event_ids(table), lines.to_pybytes()


def event_lines_buffer(
    table: pa.Table,
    project_names: pa.Array | str | None,
    branch_names: list[str | None] | None = None,
    endpoint_names: list[str | None] | None = None,
) -> pa.Buffer:
    """The events' JSON Lines of a versions table, in Arrow's buffer (PRODUCT.md,
    "Events": the row's columns under the API's names, its version, and the names where
    known). Not `raw` and the bookkeeping columns: they tripled an event's size, and with it
    the cost of a backfill with `--events-backfill`. The JSON text is assembled column by column
    by Arrow, not object by object in Python: a fraction of the CPU per event (bench/README.md);
    over a whole commit at once, since each of the ~90 Arrow calls has a fixed cost.
    `project_names`: one per row, or one for all.
    """
    version = pc.cast(table["version"], pa.string())
    kinds = pc.if_else(
        pc.equal(table["version"], 1), pa.scalar("operation.created"), "operation.changed"
    )
    no_names = pa.nulls(table.num_rows, pa.string())
    if not isinstance(project_names, (pa.Array, pa.ChunkedArray)):
        project_names = pa.repeat(pa.scalar(project_names, pa.string()), table.num_rows)
    branches = no_names if branch_names is None else pa.array(branch_names, pa.string())
    endpoints = no_names if endpoint_names is None else pa.array(endpoint_names, pa.string())
    plain_ids = _plain(table["id"])
    if plain_ids and table["id"].null_count == 0:  # the versions go inside the ids' quotes
        event_id: list[Part] = ['"', table["id"], ":", version, '"']
    else:
        event_id = _json_strings(
            pc.binary_join_element_wise(table["id"], pa.scalar(":"), version, "")
        )
    parts: list[Part] = [
        '{"id":',
        *event_id,
        ',"type":"',
        kinds,
        '","timestamp":',
        *_timestamps(table["observed_at"]),
        ',"data":{',
    ]
    for n, name in enumerate(_DATA_FIELDS):
        parts += [f'{"," if n else ""}"{name}":', *_json_values(table, name, plain_ids)]
    parts += [
        ',"project_name":',
        *_json_strings(project_names),
        ',"branch_name":',
        *_json_strings(branches),
        ',"endpoint_name":',
        *_json_strings(endpoints),
        "}}\n",
    ]
    # One buffer, straight from Arrow: no Python object per event (written to a file as is).
    return _values(_join(parts))


def _join(parts: list[Part]) -> pa.Array:
    """The parts joined per event, adjacent literals merged first (one Arrow call)."""
    merged: list[Any] = []
    for p in parts:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    joined = pc.binary_join_element_wise(
        *[pa.scalar(p) if isinstance(p, str) else p for p in merged], ""
    )
    if isinstance(joined, pa.ChunkedArray):
        # One chunk (the commit's table is combined): taken as is, combine_chunks would copy it.
        return joined.chunk(0) if joined.num_chunks == 1 else joined.combine_chunks()
    return joined


def event_ids(table: pa.Table) -> bytes:
    """The event ids of a versions table (`<id>:<version>`), newline-separated."""
    version = pc.cast(table["version"], pa.string())
    return _buffer(_join([table["id"], ":", version, "\n"]))[:-1]


def _values(strings: pa.Array) -> pa.Buffer:
    """The bytes of a string array's values, back to back (a zero-copy slice)."""
    if len(strings) == 0 or strings.buffers()[2] is None:
        return pa.py_buffer(b"")
    offsets = pa.Array.from_buffers(
        pa.int32(), len(strings) + 1, [None, strings.buffers()[1]], offset=strings.offset
    )
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return strings.buffers()[2][start:end]


def _buffer(lines: pa.Array) -> bytes:
    """The values of a string array without NULLs, back to back, as one byte string."""
    return _values(lines).to_pybytes()  # a zero-copy slice, then one copy
