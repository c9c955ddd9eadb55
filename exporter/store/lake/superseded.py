"""The superseded record on object storage (issue 24): the `superseded` Delta table.

One row (id, version, txn) for every version a later one of the same operation replaced: the
commit of batch N that adds version n+1 records (id, n, N). `operations` is then the versions
minus this small set, not an anti-join over every id (sql/00_base.sql).

Delta commits one table at a time, so the record of batch N is appended to `superseded` just
before the `operation_versions` commit of batch N, which stays the single commit point
(`LakeDataset.commit`). What makes the two one atomic step:

- readers keep only rows with `txn <= V`, V the txn version of the `operation_versions` snapshot
  they read (`reader_filter`): a record whose versions commit never landed (killed in between)
  is invisible, and a reader never sees version n+1 without n marked superseded;
- the next commit of batch N first deletes rows with `txn >= N` (`uncommitted_files`): what a
  killed attempt of N left, so the retry of N (whose rows may differ) records only its own;
- each record append carries `txn(dataset_id, N)` on this table too: a zombie writer's late
  append of N conflicts in Delta with the successor's, as on `operation_versions`.

A dataset written before the record has no `superseded` table: readers derive the set from the
versions, and the first writer migrates it once (`derive`): the table is created with every
(id, version - 1) of the committed versions, tagged with the committed txn version. The table
exists only with the whole record, so its existence is the migration's mark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from exporter.core.tables import SUPERSEDED_SCHEMA

if TYPE_CHECKING:
    import pyarrow.dataset as pads

SUPERSEDED = "superseded"
TXN = "txn"
SCHEMA = SUPERSEDED_SCHEMA.append(pa.field(TXN, pa.int64()))


def record_of(versions: pa.Table, txn: int) -> pa.Table:
    """The record of one batch: (id, version - 1, txn) of each row with version > 1 (version
    n+1 is only ever numbered after n was committed, PRODUCT.md)."""
    later = versions.filter(pc.greater(versions["version"], 1))
    return pa.table(
        [
            later["id"],
            pc.subtract(later["version"].cast(pa.int32()), pa.scalar(1, pa.int32())),
            pa.array([txn] * later.num_rows, pa.int64()),
        ],
        schema=SCHEMA,
    )


def derive(versions: pads.Dataset | None, txn: int) -> pa.Table:
    """The whole record of the versions committed so far (the migration), streamed batch by
    batch over the (id, version) columns only."""
    if versions is None:
        return SCHEMA.empty_table()
    import pyarrow.dataset as pads

    later = versions.to_table(columns=["id", "version"], filter=pads.field("version") > 1)
    return record_of(later, txn)


def uncommitted_files(add_actions: pa.Table, txn: int) -> bool:
    """True when some file of the record may hold rows of batch `txn` or later (left by an
    attempt whose versions commit never landed). A file without statistics counts as one."""
    if add_actions.num_rows == 0:
        return False
    column = f"max.{TXN}"
    if column not in add_actions.column_names:
        return True
    highest = add_actions[column]
    return bool(pc.any(pc.or_(pc.is_null(highest), pc.greater_equal(highest, txn))).as_py())


def reader_filter(txn: int | None) -> str:
    """The SQL condition a reader of the snapshot with txn version `txn` applies."""
    return f"{TXN} <= {int(txn or 0)}"


__all__ = [
    "SCHEMA",
    "SUPERSEDED",
    "TXN",
    "derive",
    "reader_filter",
    "record_of",
    "uncommitted_files",
]
