"""The summary record's total over all months (issue 24): what a report of all time reads instead
of every month's summary rows (444k group rows and 427k histogram rows at 10M operations, 79k and
158k once summed across months: the report's aggregates over them cost a third less).

Written after the commits, with `opsaudit.duckdb` (`views.write_views_database`, in the sync's
child process): the sum of the summary files the state lists as committed, per measure, project,
branch, action and ms, month NULL. Its name hashes those files' names
(`core.layout.summary_total_file`), and a reader takes it only under the name of the files
committed when it connects (`store.local.reader.local_sources`): a total of other files (a commit
or a merge since, a run killed before this) is never read. Written aside and renamed, so a reader
sees a whole file or none. Older totals are deleted once `opsaudit.duckdb` names the new one
(`delete_older_totals`), but for the one before it (a report that connected before the rename may
still read that).
"""

from __future__ import annotations

import os
from pathlib import Path

from exporter.core.duck import duckdb
from exporter.core.layout import fsync_dir, summary_total_file
from exporter.store.local.reader import committed_summary

# The summary's rows of a key summed across months: sql/90_report.sql reads these columns. The
# names of the summary files summed are kept in the file's metadata: the next total adds only
# the files committed since to this one, where none of these went (a merge replaced them).
# A histogram's rows carry only action, ms and versions (store/local/summary.py, _histograms)
# and a group's no ms: each is summed on its own key, not on every column's (5.5M operations:
# the views child's peak 175 -> 138-143 MiB, the histograms' 320k keys most of it; issue 24).
_TOTAL = """
COPY (
    SELECT
        NULL::INTEGER AS month, measure, project_id, branch_id, action, NULL::BIGINT AS ms,
        sum(versions)::BIGINT AS versions, sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries, sum(terminal)::BIGINT AS terminal,
        min(first_created_at) AS first_created_at, max(last_created_at) AS last_created_at
    FROM read_parquet($files)
    WHERE measure = 'group'
    GROUP BY measure, project_id, branch_id, action
    UNION ALL
    SELECT
        NULL::INTEGER, measure, NULL::VARCHAR, NULL::VARCHAR, action, ms,
        sum(versions)::BIGINT, NULL::BIGINT, NULL::BIGINT, NULL::BIGINT,
        NULL::TIMESTAMPTZ, NULL::TIMESTAMPTZ
    FROM read_parquet($files)
    WHERE measure <> 'group'
    GROUP BY measure, action, ms
) TO '{path}' (FORMAT parquet, COMPRESSION zstd, KV_METADATA {{files: '{files}'}})
"""


def write_summary_total(data_dir: Path) -> Path | None:
    """Write the total of the summary files committed now unless it exists; the path of the
    total readers take now (None: the dataset has no complete summary record, or no file).
    From the previous total and the files committed since where it sums none that are gone,
    else from every file (10M operations: 0.16 s of CPU, 0.29 s summing all 888k rows)."""
    summary = committed_summary(data_dir)
    if not summary:
        return None
    target = data_dir / summary_total_file(summary)
    if target.is_file():
        return target
    target.parent.mkdir(exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp"
    con = duckdb.connect(":memory:")
    try:
        con.execute("SET TimeZone = 'UTC'")
        # One thread: the child's peak memory (10M operations, every file summed: 151 MiB
        # against 213 with two) and less CPU (0.29 s against 0.38) for a wall the run waits.
        con.execute("SET threads = 1")
        every = [(data_dir / f).as_posix() for f in summary]
        total_of = _TOTAL.format(
            path=tmp.as_posix().replace("'", "''"),
            files="\n".join(sorted(summary)).replace("'", "''"),
        )
        previous = _previous_total(con, target.parent, set(summary))
        if previous is None:
            con.execute(total_of, {"files": every})
        else:
            total, summed = previous
            added = [(data_dir / f).as_posix() for f in summary if f not in summed]
            try:
                con.execute(total_of, {"files": [total.as_posix(), *added]})
            except duckdb.Error:  # a damaged total (a copy cut short): not one to add to
                con.execute(total_of, {"files": every})
    finally:
        con.close()
    with tmp.open("rb") as written:
        os.fsync(written.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)
    return target


def _previous_total(
    con: duckdb.DuckDBPyConnection, folder: Path, summary: set[str]
) -> tuple[Path, set[str]] | None:
    """The newest total and the summary files it sums, where each of them is still committed
    (`summary`); None when there is none, one of its files is gone, or it is not readable."""
    totals = _totals(folder)
    if not totals:
        return None
    try:
        rows = con.execute(
            "SELECT value FROM parquet_kv_metadata(?) WHERE key = 'files'",
            [totals[-1].as_posix()],
        ).fetchall()
    except duckdb.Error:  # not a Parquet file (a copy cut short): every file is summed
        return None
    summed = set(bytes(rows[0][0]).decode().split("\n")) if rows else None
    if not summed or not summed <= summary:
        return None
    return totals[-1], summed


def delete_older_totals(current: Path) -> None:
    """Keep `current` and the total before it (a report that connected before `current` was
    renamed in may still read that one); delete the rest and what a killed writer left. Only
    once `opsaudit.duckdb` names `current`: it names the total of its time."""
    others = [p for p in _totals(current.parent) if p != current]
    for stale in [*others[:-1], *current.parent.glob(".total-*.tmp")]:
        stale.unlink(missing_ok=True)


def _totals(folder: Path) -> list[Path]:
    """The totals in `folder`, oldest written first."""
    return sorted(folder.glob("total-*.parquet"), key=lambda p: p.stat().st_mtime_ns)


__all__ = ["delete_older_totals", "write_summary_total"]
