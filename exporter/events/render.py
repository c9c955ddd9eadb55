"""The events' JSON (issue 22, PRODUCT.md "Events"), built from a versions table by Arrow column
by column, not object by object in Python: a fraction of the CPU per event (bench/README.md)."""

from __future__ import annotations

from typing import Any

import msgspec
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["COLUMNS", "event_ids", "event_lines"]

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


def _rfc3339(column: pa.ChunkedArray) -> pa.Array:
    """UTC timestamps as RFC 3339 text: whole seconds as `...:04Z`, else `...:04.214837Z`.
    Cast as naive timestamps (the values are UTC): Arrow formats a zoned one ~100 times
    slower, which was most of the cost of recording an event."""
    naive = column.cast(pa.int64()).cast(pa.timestamp("us"))
    text = pc.replace_substring(pc.cast(naive, pa.string()), " ", "T", max_replacements=1)
    text = pc.binary_join_element_wise(text, pa.scalar("Z"), "")
    return pc.replace_substring(text, ".000000Z", "Z")


_STRINGS = frozenset({"id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"})


def _quoted(text: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value in double quotes, NULL as `null` (values that need no escaping)."""
    quoted = pc.binary_join_element_wise(pa.scalar('"'), text, pa.scalar('"'), "")
    return pc.fill_null(quoted, "null")


def _json_strings(column: pa.ChunkedArray | pa.Array) -> pa.Array:
    """Each value as a JSON string literal (`"..."`), NULL as `null`, computed by Arrow."""
    if not pc.any(pc.match_substring_regex(column, '["\\\\\\x00-\\x1f]')).as_py():
        return _quoted(column)  # nothing to escape (ids, actions, names: almost always)
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


def _json_values(table: pa.Table, name: str) -> pa.Array:
    if name in _STRINGS:
        return _json_strings(table[name])
    if name in _TIMESTAMPS:
        return _quoted(_rfc3339(table[name]))  # RFC 3339 text needs no escaping
    return pc.fill_null(pc.cast(table[name], pa.string()), "null")  # integers


_ENCODER = msgspec.json.Encoder()


def event_lines(
    table: pa.Table,
    project_names: pa.Array | str | None,
    branch_names: list[str | None] | None = None,
    endpoint_names: list[str | None] | None = None,
) -> tuple[bytes, bytes]:
    """The event ids (newline-separated) and the events' JSON Lines of a versions table (PRODUCT.md,
    "Events": the row's columns under the API's names, its version, and the names where
    known). Not `raw` and the bookkeeping columns: they tripled an event's size, and with it
    the cost of a backfill with `--events-backfill`. The JSON text is assembled column by column
    by Arrow, not object by object in Python: a fraction of the CPU per event (bench/README.md);
    over a whole commit at once, since each of the ~90 Arrow calls has a fixed cost.
    `project_names`: one per row, or one for all.
    """
    version = pc.cast(table["version"], pa.string())
    event_ids = pc.binary_join_element_wise(table["id"], pa.scalar(":"), version, "")
    kinds = pc.if_else(
        pc.equal(table["version"], 1), pa.scalar("operation.created"), "operation.changed"
    )
    no_names = pa.nulls(table.num_rows, pa.string())
    if not isinstance(project_names, (pa.Array, pa.ChunkedArray)):
        project_names = pa.repeat(pa.scalar(project_names, pa.string()), table.num_rows)
    branches = no_names if branch_names is None else pa.array(branch_names, pa.string())
    endpoints = no_names if endpoint_names is None else pa.array(endpoint_names, pa.string())
    parts: list[Any] = [
        '{"id":',
        _json_strings(event_ids),
        ',"type":"',
        kinds,
        '","timestamp":',
        _quoted(_rfc3339(table["observed_at"])),
        ',"data":{',
    ]
    for n, name in enumerate(_DATA_FIELDS):
        parts += [f'{"," if n else ""}"{name}":', _json_values(table, name)]
    parts += [
        ',"project_name":',
        _json_strings(project_names),
        ',"branch_name":',
        _json_strings(branches),
        ',"endpoint_name":',
        _json_strings(endpoints),
        "}}",
    ]
    lines = pc.binary_join_element_wise(
        *[pa.scalar(p) if isinstance(p, str) else p for p in parts], ""
    )
    # One buffer each, straight from Arrow: no Python object per event.
    return _joined(event_ids)[:-1], _joined(lines)


def event_ids(table: pa.Table) -> bytes:
    """The event ids of a versions table, newline-separated: what `event_lines` returns first."""
    version = pc.cast(table["version"], pa.string())
    return _joined(pc.binary_join_element_wise(table["id"], pa.scalar(":"), version, ""))[:-1]


def _joined(values: pa.Array | pa.ChunkedArray) -> bytes:
    """Every value followed by a newline, as one byte string (the values have no NULL)."""
    lines = pc.binary_join_element_wise(values, pa.scalar("\n"), "")
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    offsets = pa.Array.from_buffers(
        pa.int32(), len(lines) + 1, [None, lines.buffers()[1]], offset=lines.offset
    )
    start, end = offsets[0].as_py(), offsets[-1].as_py()
    return lines.buffers()[2].to_pybytes()[start:end]
