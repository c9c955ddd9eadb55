"""The report's summary record (issue 24): what `opsaudit report` reads of every version,
aggregated when the versions are committed, so that a report reads thousands of rows per month
instead of every version.

Per created month (`year * 100 + month` of created_date, the versions' partition) and
`core.tables.SUMMARY_SCHEMA`: a "group" row per (project_id, branch_id, action) with how many
versions, how many failed at least once, their failures (retries), how many are terminal and
the first and last created_at; and exact histograms of the terminal versions' total_duration_ms
("total_ms") and wall time ("wall_ms", whole ms truncated as sql/00_base.sql's `wall_ms`) per
action. Every version counts, latest or not: a version is immutable, so its contribution is a
fact when it is committed, and readers subtract the superseded versions' (the report's
`report_rows` finds them), as they subtract them from a scan (sql/90_report.sql).

The same aggregates in SQL (`report_summary_of`) derive the record where a dataset has none and
cover a window's partial months; tests hold the two equal.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from exporter.core.errors import StorageError
from exporter.core.tables import SUMMARY_SCHEMA

_TERMINAL = pa.array(["finished", "cancelled", "skipped"])  # sql/00_base.sql is_terminal
_KEYS = ["month", "measure", "project_id", "branch_id", "action", "ms"]
_SUM_ALL = pc.ScalarAggregateOptions(skip_nulls=True, min_count=0)  # no value: 0, as coalesce
_COUNT_ALL = pc.CountOptions(mode="all")


def summary_of(table: pa.Table) -> pa.Table:
    """The summary rows of a versions table (`SUMMARY_SCHEMA`)."""
    if table.num_rows == 0:
        return SUMMARY_SCHEMA.empty_table()
    dates = table["created_date"]
    month = pc.add(pc.multiply(pc.year(dates), 100), pc.month(dates)).cast(pa.int32())
    failures = table["failures_count"]
    terminal = pc.fill_null(pc.is_in(table["status"], value_set=_TERMINAL), False)
    base = pa.table(
        {
            "month": month,
            "project_id": table["project_id"],
            "branch_id": table["branch_id"],
            "action": table["action"],
            "failed": pc.fill_null(pc.greater(failures, 0), False).cast(pa.int64()),
            "retries": failures,
            "terminal": terminal.cast(pa.int64()),
            "created_at": table["created_at"],
        }
    )
    groups = base.group_by(["month", "project_id", "branch_id", "action"], use_threads=False)
    grouped = groups.aggregate(
        [
            ("month", "count", _COUNT_ALL),
            ("failed", "sum", _SUM_ALL),
            ("retries", "sum", _SUM_ALL),
            ("terminal", "sum", _SUM_ALL),
            ("created_at", "min"),
            ("created_at", "max"),
        ]
    )
    n = grouped.num_rows
    parts = [
        _rows(
            grouped["month"],
            "group",
            n,
            project_id=grouped["project_id"],
            branch_id=grouped["branch_id"],
            action=grouped["action"],
            versions=grouped["month_count"],
            failed=grouped["failed_sum"],
            retries=grouped["retries_sum"],
            terminal=grouped["terminal_sum"],
            first_created_at=grouped["created_at_min"],
            last_created_at=grouped["created_at_max"],
        )
    ]
    # Only the columns the histograms read are filtered (the whole table's strings: ~40 % more).
    done = table.select(["action", "created_at", "updated_at", "total_duration_ms"])
    parts += _histograms(done.filter(terminal), month.filter(terminal))
    return pa.concat_tables(parts)


def summary_by_month(table: pa.Table) -> Iterator[tuple[str, pa.Table]]:
    """(month partition, rows) of the summary of a versions table: summarised once (a call
    costs ~1 ms whatever its rows: once per chunk, not per month of it), then split."""
    summary = summary_of(table)
    months = sorted(pc.unique(summary["month"]).to_pylist())
    for month in months:
        part = summary if len(months) == 1 else summary.filter(pc.equal(summary["month"], month))
        yield f"created_month={month // 100:04d}-{month % 100:02d}", part


def _histograms(done: pa.Table, month: pa.ChunkedArray) -> list[pa.Table]:
    """The "total_ms" and "wall_ms" rows of terminal versions `done` (created in `month`)."""
    wall = pc.divide(
        pc.subtract(done["updated_at"].cast(pa.int64()), done["created_at"].cast(pa.int64())),
        1000,  # integer division truncates, as DuckDB's `//` in wall_ms
    )
    out = []
    for measure, values in (("total_ms", done["total_duration_ms"]), ("wall_ms", wall)):
        hist = (
            pa.table({"month": month, "action": done["action"], "ms": values})
            .filter(pc.is_valid(values))
            .group_by(["month", "action", "ms"], use_threads=False)
            .aggregate([("month", "count", _COUNT_ALL)])
        )
        out.append(
            _rows(
                hist["month"],
                measure,
                hist.num_rows,
                action=hist["action"],
                ms=hist["ms"],
                versions=hist["month_count"],
            )
        )
    return out


def _rows(month: pa.ChunkedArray, measure: str, n: int, **columns: pa.ChunkedArray) -> pa.Table:
    """Rows of `SUMMARY_SCHEMA`: the columns given, NULL in the others."""
    arrays = []
    for field in SUMMARY_SCHEMA:
        if field.name == "month":
            arrays.append(month.cast(field.type))
        elif field.name == "measure":
            arrays.append(pa.repeat(pa.scalar(measure, pa.string()), n))
        elif field.name in columns:
            arrays.append(columns[field.name].cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.table(arrays, schema=SUMMARY_SCHEMA)


def merge_summaries(tables: Iterable[pa.Table]) -> pa.Table:
    """Several summaries as one: rows of the same key summed (the histograms' counts too), the
    first and last created_at the least and the greatest. Compaction merges the record's files
    with it, so the record grows with the keys, not with the commits."""
    parts = [t for t in tables if t.num_rows]
    if not parts:
        return SUMMARY_SCHEMA.empty_table()
    merged = (
        pa.concat_tables(parts)
        .group_by(_KEYS, use_threads=False)
        .aggregate(
            [
                ("versions", "sum"),
                ("failed", "sum"),
                ("retries", "sum"),
                ("terminal", "sum"),
                ("first_created_at", "min"),
                ("last_created_at", "max"),
            ]
        )
    )
    return pa.table(
        [
            merged[f.name if f.name in _KEYS else f"{f.name}_{_AGGREGATE[f.name]}"].cast(f.type)
            for f in SUMMARY_SCHEMA
        ],
        schema=SUMMARY_SCHEMA,
    )


_AGGREGATE = {
    "versions": "sum",
    "failed": "sum",
    "retries": "sum",
    "terminal": "sum",
    "first_created_at": "min",
    "last_created_at": "max",
}

# A compaction's merge keeps each kind of row in the columns it has (the others are NULL in it by
# construction, `summary_of`): a "group" row its project, branch and counts; a histogram row its
# ms and count. ~85 % of a month's rows are histogram rows: 20 bytes each instead of ~100.
_GROUP = "group"
_GROUP_KEYS = ["month", "project_id", "branch_id"]
_GROUP_COLUMNS = [*_GROUP_KEYS, *_AGGREGATE]
_HISTOGRAM_KEYS = ["month", "ms"]
_HISTOGRAM_COLUMNS = [*_HISTOGRAM_KEYS, "versions"]

_CONSTANTS = ("measure", "action")  # one value in a kind's rows
_Kind = tuple[str | None, str | None]  # (measure, action): the rows of one merged part


def merged_summary(batches: Iterable[pa.RecordBatch], step: int) -> Iterator[pa.Table]:
    """`merge_summaries` of a month's summary files, read as `batches`, in bounded memory: the
    rows of each (measure, action) are kept in that kind's columns only and merged into that
    kind's merged rows once `step` rows wait; yields the merged rows one kind at a time
    (`SUMMARY_SCHEMA`), each kind's compact rows freed as it goes. A month of a 5M-operation
    backfill: ~1M rows in, ~150k out (15.6 MiB as `SUMMARY_SCHEMA`, ~5 as kinds)."""
    merged: dict[_Kind, pa.Table] = {}
    waiting: dict[_Kind, list[pa.Table]] = {}
    rows = 0

    def merge_waiting() -> None:
        for kind, parts in waiting.items():
            previous = [merged[kind]] if kind in merged else []
            merged[kind] = _merge_kind(kind[0], [*previous, *parts])
        waiting.clear()

    for batch in batches:
        for kind, part in _kinds(pa.Table.from_batches([batch])):
            waiting.setdefault(kind, []).append(part)
        rows += batch.num_rows
        if rows >= step:
            merge_waiting()
            rows = 0
    merge_waiting()
    for kind in sorted(merged, key=lambda k: tuple((v is None, v or "") for v in k)):
        yield _in_schema(*kind, merged.pop(kind))


def _same(column: pa.ChunkedArray, value: str | None) -> pa.ChunkedArray:
    return pc.is_null(column) if value is None else pc.equal(column, value)


def _kinds(table: pa.Table) -> Iterator[tuple[_Kind, pa.Table]]:
    """The rows of a summary table per (measure, action), in their kind's columns only."""
    for measure in pc.unique(table["measure"]).to_pylist():
        kept = _GROUP_COLUMNS if measure == _GROUP else _HISTOGRAM_COLUMNS
        rows = table.filter(_same(table["measure"], measure))
        dropped = [c for c in rows.column_names if c not in kept and c not in _CONSTANTS]
        if any(rows[column].null_count != rows.num_rows for column in dropped):
            raise StorageError(
                f"the summary record has rows of measure {measure!r} with values its format "
                "leaves NULL: the dataset was changed outside opsaudit"
            )
        rows = rows.select(["action", *kept])
        for action in pc.unique(rows["action"]).to_pylist():
            yield (measure, action), rows.filter(_same(rows["action"], action)).select(kept)


def _merge_kind(measure: str | None, tables: list[pa.Table]) -> pa.Table:
    """Rows of one kind with the same key summed (as `merge_summaries`), in its columns."""
    keys, kept = (
        (_GROUP_KEYS, _GROUP_COLUMNS)
        if measure == _GROUP
        else (_HISTOGRAM_KEYS, _HISTOGRAM_COLUMNS)
    )
    values = [column for column in kept if column not in keys]
    merged = (
        pa.concat_tables(tables)
        .group_by(keys, use_threads=False)
        .aggregate([(column, _AGGREGATE[column]) for column in values])
    )
    return pa.table(
        [merged[c] for c in keys] + [merged[f"{c}_{_AGGREGATE[c]}"] for c in values], names=kept
    )


def _in_schema(measure: str | None, action: str | None, part: pa.Table) -> pa.Table:
    """A kind's merged rows as `SUMMARY_SCHEMA` rows (NULL in the columns it does not have)."""
    n = part.num_rows
    constants = dict(zip(_CONSTANTS, (measure, action), strict=True))
    arrays = []
    for field in SUMMARY_SCHEMA:
        if field.name in constants:
            arrays.append(pa.repeat(pa.scalar(constants[field.name], field.type), n))
        elif field.name in part.column_names:
            arrays.append(part[field.name].cast(field.type))
        else:
            arrays.append(pa.nulls(n, field.type))
    return pa.table(arrays, schema=SUMMARY_SCHEMA)


# What the summary reads of a versions table.
SUMMARY_COLUMNS = [
    "project_id",
    "branch_id",
    "action",
    "status",
    "failures_count",
    "created_at",
    "updated_at",
    "total_duration_ms",
    "created_date",
]


def summary_of_files(paths: Sequence[Path]) -> pa.Table:
    """The summary of versions files (a dataset written before the record), merged as it goes:
    memory is a few batches' summaries, not the files'."""
    summaries: list[pa.Table] = []
    for path in paths:
        with pq.ParquetFile(path, memory_map=True) as source:
            for batch in source.iter_batches(
                batch_size=262_144, columns=SUMMARY_COLUMNS, use_threads=False
            ):
                summaries.append(summary_of(pa.Table.from_batches([batch])))
                if len(summaries) >= 8:
                    summaries = [merge_summaries(summaries)]
    return merge_summaries(summaries)


__all__ = [
    "SUMMARY_COLUMNS",
    "merge_summaries",
    "merged_summary",
    "summary_by_month",
    "summary_of",
    "summary_of_files",
]
