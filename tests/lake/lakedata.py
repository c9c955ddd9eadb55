"""Test data for the lake tests: operation_versions rows in the exporter's schema."""

from __future__ import annotations

import collections
from datetime import date, datetime, timedelta, timezone

import pyarrow as pa
import pyarrow.compute as pc

from exporter.store.local.dataset import VERSIONS_SCHEMA


def versions(batch: int, rows: int = 50, *, month: date | None = None) -> pa.Table:
    """Rows `batch * rows .. (batch + 1) * rows - 1` (id `op-<n>`), all created in one month
    (by default month number `batch` after 2024-01), so each batch lands in its own partition."""
    if month is None:
        y, m = divmod(batch, 12)
        month = date(2024 + y, m + 1, 1)
    base = datetime(month.year, month.month, 1, tzinfo=timezone.utc)
    ids = range(batch * rows, (batch + 1) * rows)
    created = [base + timedelta(minutes=i % 1000) for i in range(rows)]
    cols = {
        "id": [f"op-{n:08d}" for n in ids],
        "project_id": [f"prj-{n % 7}" for n in ids],
        "branch_id": [None if n % 5 == 0 else f"br-{n % 3}" for n in ids],
        "endpoint_id": [None] * rows,
        "action": ["start_compute" if n % 2 else "apply_config" for n in ids],
        "status": ["finished" if n % 9 else "failed" for n in ids],
        "failures_count": [n % 3 for n in ids],
        "error": [None if n % 9 else "boom" for n in ids],
        "retry_at": [None] * rows,
        "created_at": created,
        "updated_at": created,
        "total_duration_ms": [n * 7 for n in ids],
        "raw": [f'{{"id":"op-{n:08d}"}}' for n in ids],
        "version": [1] * rows,
        "observed_at": created,
        "run_id": [f"run-{batch}"] * rows,
        "created_date": [c.date() for c in created],
    }
    return pa.Table.from_pydict(cols, schema=VERSIONS_SCHEMA)


LATER = 5  # operations of the previous batch that each batch gives a version 2


def versions_with_later(batch: int, rows: int = 50) -> pa.Table:
    """`versions(batch, rows)` plus version 2 of the first LATER operations of batch - 1 (status
    and updated_at changed, observed a day later): each commit after the first supersedes some."""
    table = versions(batch, rows)
    if batch == 0:
        return table
    earlier = versions(batch - 1, rows).slice(0, LATER)
    day = pa.scalar(timedelta(days=1), pa.duration("us"))
    later = (
        earlier.set_column(
            earlier.schema.get_field_index("version"), "version", pa.array([2] * LATER, pa.int32())
        )
        .set_column(
            earlier.schema.get_field_index("status"), "status", pa.array(["cancelled"] * LATER)
        )
        .set_column(
            earlier.schema.get_field_index("observed_at"),
            "observed_at",
            pc.add(earlier["observed_at"], day),
        )
        .set_column(
            earlier.schema.get_field_index("run_id"), "run_id", pa.array([f"run-{batch}"] * LATER)
        )
    )
    return pa.concat_tables([table, later.cast(VERSIONS_SCHEMA)])


def request_kind(path: str, control: str, other: str) -> str:
    if "/_delta_log/" in path:
        return "checkpoint" if "checkpoint" in path else "log"
    if "/_opsaudit/state/" in path:
        return "state"
    if "/_opsaudit/" in path:
        return control
    return "data" if path.endswith(".parquet") else other


def count_requests(
    entries: list[list[str]], control: str = "control", other: str = "list"
) -> collections.Counter[str]:
    """Requests of the server's log by "METHOD kind"; `control` and `other` name the lease/marker
    objects and the rest (listings)."""
    return collections.Counter(f"{e[0]} {request_kind(e[1], control, other)}" for e in entries)
