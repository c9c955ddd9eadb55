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
    ~100 times slower, which was most of the cost of recording an event. A column of whole
    seconds only (the API's created_at and updated_at) is cast as seconds, one of fractions
    only as is: a pass deleting `.000000` saved."""
    micros = column.cast(pa.int64())
    fraction = pc.subtract(micros, pc.multiply(pc.divide(micros, 1_000_000), 1_000_000))
    whole = pc.equal(fraction, 0)  # NULL for NULL: `all` and `any` skip them
    naive = micros.cast(pa.timestamp("us"))
    if pc.all(whole).as_py() is True:
        text = pc.cast(naive.cast(pa.timestamp("s")), pa.string())
    elif pc.any(whole).as_py() is True:
        text = pc.replace_substring(pc.cast(naive, pa.string()), ".000000", "")
    else:
        text = pc.cast(naive, pa.string())
    return pc.replace_substring(text, " ", "T", max_replacements=1)


_STRINGS = frozenset(
    {"id", "project_id", "branch_id", "endpoint_id", "action", "status", "error"}
    | {"project_name", "branch_name", "endpoint_name"}
)

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
    if name == "event_id":
        version = pc.cast(table["version"], pa.string())
        if plain_ids and table["id"].null_count == 0:  # the versions go inside the ids' quotes
            return ['"', table["id"], ":", version, '"']
        return _json_strings(pc.binary_join_element_wise(table["id"], pa.scalar(":"), version, ""))
    if name == "type":
        created = pc.equal(table["version"], 1)
        return ['"', pc.if_else(created, pa.scalar("operation.created"), "operation.changed"), '"']
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
    branch_names: list[str | None] | pa.Array | None = None,
    endpoint_names: list[str | None] | pa.Array | None = None,
) -> pa.Buffer:
    """The events' JSON Lines of a versions table, in Arrow's buffer (PRODUCT.md,
    "Events": the row's columns under the API's names, its version, and the names where
    known). Not `raw` and the bookkeeping columns: they tripled an event's size, and with it
    the cost of a backfill with `--events-backfill`. The JSON text is assembled column by column
    by Arrow, not object by object in Python: a fraction of the CPU per event (bench/README.md);
    over a whole commit at once, since each Arrow call has a fixed cost.
    `project_names`: one per row, or one for all.
    """
    n = table.num_rows
    if not isinstance(project_names, (pa.Array, pa.ChunkedArray)):
        project_names = pa.repeat(pa.scalar(project_names, pa.string()), n)
    names = {"project_name": project_names}
    for name, given in (("branch_name", branch_names), ("endpoint_name", endpoint_names)):
        names[name] = (
            pa.nulls(n, pa.string())
            if given is None
            else given
            if isinstance(given, (pa.Array, pa.ChunkedArray))
            else pa.array(given, pa.string())
        )
    columns = {c: _one_chunk(table[c]) for c in COLUMNS} | {
        k: _one_chunk(v) for k, v in names.items()
    }
    rows = pa.table(columns)
    plain_ids = _plain(rows["id"])
    parts: list[Part | _Group] = []
    for grouped, fields in _SEGMENTS:
        if grouped:
            parts.append(_Group(fields))
        else:
            for before, name in fields:
                parts += [before, *_json_values(rows, name, plain_ids)]
    parts.append("}}\n")
    # One buffer, straight from Arrow: no Python object per event (written to a file as is).
    return _values(_join(_render_groups(rows, parts, plain_ids)))


class _Group:
    """Adjacent fields of few distinct combinations of values (the names, an action and its
    status, the run's observation times): their text is built once per distinct combination
    and taken per event. The line's one join then has ~15 parts instead of ~40, and each part
    costs it ~7 ns per event whatever its length (bench/README.md, "Issue 22")."""

    def __init__(self, fields: list[tuple[str, str]]):
        self.fields = fields


def _render_groups(rows: pa.Table, parts: list[Part | _Group], plain_ids: bool) -> list[Part]:
    """`parts` with each `_Group` rendered; the literal text on either side of a group goes
    into its values (built once per distinct combination, not joined per event)."""
    out: list[Part] = []
    for i, part in enumerate(parts):
        if not isinstance(part, _Group):
            if not (isinstance(part, str) and _next_group(parts, i)):
                out.append(part)
            continue
        before = ""
        while out and isinstance(out[-1], str):
            before = out.pop() + before
        after = ""
        for following in parts[i + 1 :]:
            if not isinstance(following, str):
                break
            after += following
        out += _grouped(rows, part.fields, before, after, plain_ids)
    return out


def _next_group(parts: list[Part | _Group], i: int) -> bool:
    """Whether literal `parts[i]` is among those right after a group (taken into it)."""
    for previous in reversed(parts[:i]):
        if isinstance(previous, _Group):
            return True
        if not isinstance(previous, str):
            return False
    return False


def _grouped(
    rows: pa.Table, fields: list[tuple[str, str]], before: str, after: str, plain_ids: bool
) -> list[Part]:
    """The parts of a group's fields between literals `before` and `after`: one string per
    event, taken from the text of each distinct combination; per event when most differ."""
    flat = [before]
    codes = _codes([rows[_KEYS.get(name, name)] for _, name in fields], rows.num_rows)
    if codes is None:
        for text, name in fields:
            flat += [text, *_json_values(rows, name, plain_ids)]
        return [*flat, after]
    first, indices = codes
    distinct = rows.take(first)
    for text, name in fields:
        flat += [text, *_json_values(distinct, name, plain_ids)]
    return [_join([*flat, after]).take(indices)]


def _codes(columns: list[pa.ChunkedArray], n: int) -> tuple[pa.Array, pa.Array] | None:
    """For rows of these columns' values: the first row of each distinct combination, and
    each row's combination (an index into those first rows); None when more than half of the
    rows differ (then taking would cost more than it saves). NULL is a value of its own."""
    if n == 0:
        return None
    key: pa.Array | None = None
    distinct = 1
    for column in columns:
        encoded = pc.dictionary_encode(_one_chunk(column), null_encoding="encode")
        indices = encoded.indices.cast(pa.int64())
        size = len(encoded.dictionary)
        key = indices if key is None else pc.add(pc.multiply(key, size), indices)
        distinct *= size
        if distinct > n:  # renumbered densely: the key stays below n * size
            dense = pc.dictionary_encode(key)
            key, distinct = dense.indices.cast(pa.int64()), len(dense.dictionary)
        if distinct > n // 2:
            return None
    assert key is not None
    combined = pc.dictionary_encode(key)
    if len(combined.dictionary) > n // 2:
        return None
    # Dictionary order is first-occurrence order: each value's first row.
    return pc.index_in(combined.dictionary, value_set=key), combined.indices


def _one_chunk(column: pa.Array | pa.ChunkedArray) -> pa.Array:
    if isinstance(column, pa.ChunkedArray):
        return column.chunk(0) if column.num_chunks == 1 else column.combine_chunks()
    return column


# The line, field by field: (the literal before the value, the field). A segment of
# `_Group`ed fields is built per distinct combination of their values (`_grouped`).
_SEGMENTS: list[tuple[bool, list[tuple[str, str]]]] = [
    (False, [('{"id":', "event_id")]),
    (True, [(',"type":', "type"), (',"timestamp":', "observed_at")]),
    (False, [(',"data":{"id":', "id")]),
    (
        True,
        [(f',"{name}":', name) for name in ("project_id", "branch_id", "endpoint_id")],
    ),
    (
        True,
        [
            (f',"{name}":', name)
            for name in ("action", "status", "failures_count", "error", "retry_at")
        ],
    ),
    (
        False,
        [(f',"{name}":', name) for name in ("created_at", "updated_at", "total_duration_ms")],
    ),
    (
        True,
        [
            (f',"{name}":', name)
            for name in ("version", "project_name", "branch_name", "endpoint_name")
        ],
    ),
]
_KEYS = {"type": "version"}  # a field's value follows from this column's


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
