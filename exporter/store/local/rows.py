"""Rows of one run read back from committed versions files (issue 22: the events outbox builds its
events' JSON from them at delivery instead of keeping it in the state)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from exporter.core.tables import VERSIONS_SCHEMA

__all__ = ["run_rows"]


def run_rows(
    files: Sequence[Path], run_id: str, ids: Sequence[str], columns: Sequence[str]
) -> pa.Table:
    """The rows of run `run_id` whose id is in `ids`, with `columns`, from `files` (versions
    files), wherever compaction moved them: each row keeps its run_id. Row groups whose run_id
    statistics exclude the run are skipped; memory is one row group's id and run_id, plus the
    rows found."""
    wanted = pa.array(sorted(set(ids)), pa.string())
    columns = list(columns)
    parts: list[pa.Table] = []
    for path in files:
        with pq.ParquetFile(path, memory_map=True) as source:
            at = source.schema_arrow.get_field_index("run_id")
            for group in range(source.num_row_groups):
                stats = source.metadata.row_group(group).column(at).statistics
                ranged = stats is not None and stats.has_min_max
                if ranged and not stats.min <= run_id <= stats.max:
                    continue  # no row of the run in this row group
                keys = source.read_row_group(group, columns=["run_id", "id"])
                mask = pc.and_(
                    pc.equal(keys["run_id"], run_id), pc.is_in(keys["id"], value_set=wanted)
                )
                if pc.any(mask).as_py():
                    rows = source.read_row_group(group, columns=columns)
                    parts.append(rows.filter(mask))
    if not parts:
        return VERSIONS_SCHEMA.empty_table().select(columns)
    return pa.concat_tables(parts)
