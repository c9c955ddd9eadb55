"""Operation objects from the API to typed Arrow columns, and their content fingerprints.

A page arrives decoded in C into `Operation` structs (`api.client`: no per-operation dict); columns
are built one at a time from their attributes (not row by row into a table), and timestamps are
parsed by Arrow's C parser: together these keep client CPU per operation low (PRODUCT.md,
performance targets). Each operation's full JSON goes to `raw`, so fields we do not know yet are
never lost, and the fingerprint is taken from it.
"""

from __future__ import annotations

import array
import hashlib
import importlib.abc
import itertools
import sys
from collections.abc import Sequence
from typing import Any

import msgspec
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from msgspec.structs import astuple

from exporter.core.operation import Operation
from exporter.core.tables import VERSIONS_SCHEMA
from exporter.core.timeutil import UTC_US, timestamps_array
from exporter.store.state import TERMINAL_STATUSES

_US_PER_DAY = 86_400_000_000

_STRING_FIELDS = ("id", "project_id", "branch_id", "endpoint_id", "action", "status", "error")
_INT_FIELDS = ("failures_count", "total_duration_ms")
_FIELDS = Operation.__struct_fields__  # astuple's order


class _NoPandas(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> None:
        if fullname.partition(".")[0] == "pandas":
            raise ImportError("pandas is not needed to build Arrow columns")
        return None


def arrow_without_pandas() -> None:
    """Have pyarrow take pandas as absent, unless something imported it already.

    pyarrow's first `pa.array` of a Python list imports pandas (when it is installed) only to
    ask whether the list is a pandas object: ~0.25 s of CPU and ~40 MiB for a sync that never
    has one (issue 24). pyarrow asks once per process; here it asks with pandas out of reach,
    as where pandas is not installed. Asking for pandas outright later (`to_pandas`) still
    imports it.
    """
    if "pandas" in sys.modules:
        return
    blocker = _NoPandas()
    sys.meta_path.insert(0, blocker)
    try:
        pa.array([0])
    finally:
        sys.meta_path.remove(blocker)


def is_terminal(op: Operation) -> bool:
    """`failed` and unknown statuses are not terminal: the platform may still move them."""
    return op.status in TERMINAL_STATUSES


def fingerprint(raw: Any) -> bytes:
    """A digest of the whole object (its JSON text `raw`, decoded: key order and spacing do not
    count): a changed state is detected by content (PRODUCT.md)."""
    op = orjson.loads(memoryview(raw))
    return hashlib.blake2b(orjson.dumps(op, option=orjson.OPT_SORT_KEYS), digest_size=16).digest()


def _strings(values: Sequence[Any]) -> pa.Array:
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # A field changed type upstream (e.g. a number where a string was): keep its text.
        return pa.array(
            [
                None if v is None else v if isinstance(v, str) else orjson.dumps(v).decode()
                for v in values
            ],
            type=pa.string(),
        )


def _ints(values: Sequence[Any]) -> pa.Array:
    # Arrow infers the type in the same one pass as it converts: integers (and NULLs) alone
    # infer int64. Converting to int64 directly would truncate a float (1.5 -> 1) whenever
    # every value of the chunk converts, and NULL it when another value does not.
    try:
        inferred = pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
        inferred = None
    if inferred is not None and inferred.type in (pa.int64(), pa.null()):
        return inferred.cast(pa.int64())
    # Not an integer after all (a float, a string, a bool, out of range): NULL in the typed
    # column, the value stays in `raw`.
    return pa.array(
        [
            v if isinstance(v, int) and not isinstance(v, bool) and -(2**63) <= v < 2**63 else None
            for v in values
        ],
        type=pa.int64(),
    )


def _timestamps(values: Sequence[Any]) -> pa.Array:
    try:
        return timestamps_array(values)
    except (ValueError, TypeError, pa.ArrowInvalid, pa.ArrowTypeError):
        cleaned = [v if isinstance(v, str) else None for v in values]
        out = []
        for v in cleaned:
            try:
                out.append(timestamps_array([v])[0].as_py())
            except (ValueError, pa.ArrowInvalid):
                out.append(None)
        return pa.array(out, type=UTC_US)


_ENCODER = msgspec.json.Encoder()


def encode_raw(op: dict[str, Any]) -> bytes:
    """JSON text of an operation we only have decoded (a single-operation GET)."""
    return _ENCODER.encode(op)


def _raw_column(raws: Sequence[Any]) -> pa.Array:
    """A string column straight from JSON byte slices: one join, no per-value Arrow calls."""
    data = b"".join(raws)
    offsets = array.array("q", [0])
    offsets.extend(itertools.accumulate(len(r) for r in raws))
    return pa.LargeStringArray.from_buffers(
        len(raws), pa.py_buffer(offsets), pa.py_buffer(data)
    ).cast(pa.string())


def versions_table(
    ops: Sequence[Operation],
    raws: Sequence[Any],
    created_us: Sequence[int],
    versions: Sequence[int],
    observed_us: Sequence[int],
    run_id: str,
) -> pa.Table:
    """The `operation_versions` rows for these operation objects (DESIGN.md columns).

    `raws` holds each object's JSON text (bytes or buffers), `created_us` its parsed created_at.
    `ops` are `Operation` structs: their fields are read in the struct's order (`astuple`).
    """
    # Every field's values at once: each struct as a tuple, transposed, both in C (half the CPU
    # of one attribute pass per field; bench/cpu_profile.py). Empty: no tuple to transpose.
    values = dict(zip(_FIELDS, zip(*map(astuple, ops)))) if ops else dict.fromkeys(_FIELDS, ())
    columns: dict[str, pa.Array] = {}
    for name in _STRING_FIELDS:
        columns[name] = _strings(values[name])
    for name in _INT_FIELDS:
        columns[name] = _ints(values[name])
    for name in ("retry_at", "updated_at"):
        columns[name] = _timestamps(values[name])
    created = pa.array(created_us, type=pa.int64())
    columns["created_at"] = created.cast(UTC_US)
    columns["created_date"] = pc.divide(created, _US_PER_DAY).cast(pa.int32()).cast(pa.date32())
    columns["raw"] = _raw_column(raws)
    columns["version"] = pa.array(versions, type=pa.int32())
    columns["observed_at"] = pa.array(observed_us, type=pa.int64()).cast(UTC_US)
    columns["run_id"] = pa.array([run_id] * len(ops), type=pa.string())
    return pa.Table.from_arrays([columns[f.name] for f in VERSIONS_SCHEMA], schema=VERSIONS_SCHEMA)


def created_micros(ops: Sequence[Operation]) -> list[int]:
    """Each operation's `created_at` as epoch microseconds; raises ValueError if one is bad."""
    values = [op.created_at for op in ops]
    if not all(isinstance(v, str) for v in values):
        raise ValueError("an operation has no created_at")
    return timestamps_array(values).cast(pa.int64()).to_pylist()
