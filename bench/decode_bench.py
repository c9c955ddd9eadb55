"""Decode a page of operations into typed columns, three ways, side by side (issue 24).

    python bench/decode_bench.py --pages 20

Real pages of 1000 operations from the simulator (one HTTP GET each, outside the timing), then,
per page, CPU µs per operation (`time.process_time`, best of `--repeat`) of:

- `dicts` (the walk before issue 24): `orjson.loads` of the body into dicts, msgspec's `Raw`
  slices for `raw`, `created_at` parsed, Arrow columns from the dicts' values;
- `walk` (what the client and the walk do now): the body decoded once into the client's
  `Operation` structs (`Any` fields) plus the `Raw` slices, `created_micros`, `versions_table`;
- `msgspec`: the body decoded once into `msgspec.Struct`s with typed fields (plus a second pass
  for the `Raw` slices), then Arrow columns from the structs' attributes;
- `pyarrow.json`: the `Raw` slices joined as JSON Lines and parsed by Arrow's C reader straight
  into typed columns (timestamps as strings, then parsed by `timestamps_array`).

Only the decode is compared: the walk's classification, fingerprints and the Parquet write are
not in it. Then one more line, `walk+Parquet`: `walk` and the write of its rows as the sync writes
them (zstd, the dataset's dictionary columns, row groups of the spill's size, into memory): the
floor of this design's page-to-file path, with no HTTP, walk, records or commits around it.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from typing import Any

import httpx
import msgspec
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

from exporter.api.client import _OPERATIONS_DECODER, _RAW_DECODER
from exporter.core.tables import VERSIONS_SCHEMA
from exporter.core.timeutil import UTC_US, timestamps_array
from exporter.engine.records import (
    _ints,
    _raw_column,
    _strings,
    _timestamps,
    created_micros,
    versions_table,
)
from exporter.simulator import SimConfig, Simulator
from exporter.store.local.spill import ROW_GROUP_ROWS


class _Op(msgspec.Struct):
    id: str
    project_id: str
    created_at: str
    updated_at: str | None = None
    branch_id: str | None = None
    endpoint_id: str | None = None
    action: str | None = None
    status: str | None = None
    failures_count: int | None = None
    error: str | None = None
    retry_at: str | None = None
    total_duration_ms: int | None = None


class _Page(msgspec.Struct):
    operations: list[_Op]


_TYPED = msgspec.json.Decoder(_Page)
_STRINGS = ("id", "project_id", "branch_id", "endpoint_id", "action", "status", "error")
_JSON_SCHEMA = pa.schema(
    [(name, pa.string()) for name in _STRINGS]
    + [("failures_count", pa.int64()), ("total_duration_ms", pa.int64())]
    + [("created_at", pa.string()), ("updated_at", pa.string()), ("retry_at", pa.string())]
)


def via_dicts(body: bytes) -> pa.Table:
    ops = orjson.loads(body)["operations"]
    raws = _RAW_DECODER.decode(body).operations
    n = len(ops)
    created = timestamps_array([op.get("created_at") for op in ops]).cast(pa.int64())
    columns: dict[str, pa.Array] = {}
    for name in _STRINGS:
        columns[name] = _strings([op.get(name) for op in ops])
    for name in ("failures_count", "total_duration_ms"):
        columns[name] = _ints([op.get(name) for op in ops])
    for name in ("retry_at", "updated_at"):
        columns[name] = _timestamps([op.get(name) for op in ops])
    columns["created_at"] = created.cast(UTC_US)
    columns["created_date"] = pc.divide(created, 86_400_000_000).cast(pa.int32()).cast(pa.date32())
    columns["raw"] = _raw_column(raws)
    columns["version"] = pa.array([1] * n, type=pa.int32())
    columns["observed_at"] = pa.array([0] * n, type=pa.int64()).cast(UTC_US)
    columns["run_id"] = pa.array(["bench"] * n, type=pa.string())
    return pa.Table.from_arrays([columns[f.name] for f in VERSIONS_SCHEMA], schema=VERSIONS_SCHEMA)


def via_walk(body: bytes) -> pa.Table:
    ops = _OPERATIONS_DECODER.decode(body).operations
    raws = _RAW_DECODER.decode(body).operations
    created = created_micros(ops)
    n = len(ops)
    return versions_table(ops, raws, created, [1] * n, [0] * n, "bench")


def via_msgspec(body: bytes) -> pa.Table:
    ops = _TYPED.decode(body).operations
    raws = _RAW_DECODER.decode(body).operations
    columns: dict[str, Any] = {
        name: pa.array([getattr(o, name) for o in ops], type=pa.string()) for name in _STRINGS
    }
    for name in ("failures_count", "total_duration_ms"):
        columns[name] = pa.array([getattr(o, name) for o in ops], type=pa.int64())
    for name in ("created_at", "updated_at", "retry_at"):
        columns[name] = timestamps_array([getattr(o, name) for o in ops])
    columns["raw"] = _raw_column(raws)
    return pa.table(columns)


def via_pyarrow_json(body: bytes) -> pa.Table:
    raws = _RAW_DECODER.decode(body).operations
    lines = b"\n".join(bytes(r) for r in raws)
    table = pj.read_json(
        io.BytesIO(lines),
        read_options=pj.ReadOptions(use_threads=False, block_size=1 << 24),
        parse_options=pj.ParseOptions(
            explicit_schema=_JSON_SCHEMA, unexpected_field_behavior="ignore"
        ),
    )
    for name in ("created_at", "updated_at", "retry_at"):
        i = table.schema.get_field_index(name)
        try:  # Arrow's C parser on the Arrow strings; odd forms by the per-value fallback
            parsed = pc.cast(table[name], UTC_US)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            parsed = timestamps_array(table[name].to_pylist())
        table = table.set_column(i, pa.field(name, UTC_US), parsed)
    return table.append_column("raw", _raw_column(raws))


# The dataset's dictionary-encoded columns (store.local.dataset): the writer the sync's spill opens.
_DICTIONARY = ["project_id", "branch_id", "endpoint_id", "action", "status", "error", "run_id"]


def walk_and_parquet(bodies: list[bytes]) -> int:
    """Every page through `via_walk`, its rows written as the spill writes a partition's; the
    file's size."""
    sink = io.BytesIO()
    with pq.ParquetWriter(
        sink, VERSIONS_SCHEMA, compression="zstd", use_dictionary=_DICTIONARY
    ) as w:
        pending: list[pa.Table] = []
        rows = 0
        for body in bodies:
            table = via_walk(body)
            pending.append(table)
            rows += table.num_rows
            if rows >= ROW_GROUP_ROWS:
                w.write_table(pa.concat_tables(pending), row_group_size=rows)
                pending, rows = [], 0
        if pending:
            w.write_table(pa.concat_tables(pending), row_group_size=rows)
    return sink.tell()


def _print(name: str, times: list[float], ops: int, pages: int) -> None:
    best, median = min(times), statistics.median(times)
    print(
        f"{name:13s} {best / ops * 1e6:5.2f} µs/op best, {median / ops * 1e6:5.2f} median "
        f"({ops:,} operations in {pages} pages, CPU)"
    )


def fetch_pages(pages: int) -> list[bytes]:
    config = SimConfig(
        seed=3, projects=1, shared_projects=0, days=30, ops_per_project_per_day=pages * 40
    )
    with Simulator(config) as sim:
        project = sim.project_ids()[0]
        headers = {"Authorization": f"Bearer {sim.personal_key}"}
        out: list[bytes] = []
        cursor = None
        with httpx.Client(base_url=sim.base_url, headers=headers) as client:
            while len(out) < pages:
                params: dict[str, Any] = {"limit": 1000}
                if cursor:
                    params["cursor"] = cursor
                reply = client.get(f"/projects/{project}/operations", params=params)
                reply.raise_for_status()
                out.append(reply.content)
                cursor = orjson.loads(reply.content).get("pagination", {}).get("cursor")
                if not cursor:
                    break
        return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    bodies = fetch_pages(args.pages)
    ops = sum(len(orjson.loads(b)["operations"]) for b in bodies)
    reference = [via_dicts(b) for b in bodies]
    for name, decode in (
        ("dicts", via_dicts),
        ("walk", via_walk),
        ("msgspec", via_msgspec),
        ("pyarrow.json", via_pyarrow_json),
    ):
        for body, expected in zip(bodies, reference, strict=True):
            got = decode(body)
            for column in got.column_names:  # the same values as today's columns
                assert got[column].to_pylist() == expected[column].to_pylist(), (name, column)
        times = []
        for _ in range(args.repeat):
            started = time.process_time()
            for body in bodies:
                decode(body)
            times.append(time.process_time() - started)
        _print(name, times, ops, len(bodies))
    times = []
    for _ in range(args.repeat):
        started = time.process_time()
        walk_and_parquet(bodies)
        times.append(time.process_time() - started)
    _print("walk+Parquet", times, ops, len(bodies))
    return 0


if __name__ == "__main__":
    sys.exit(main())
