"""The Arrow schemas of the tables readers see: `operation_versions` (and its superseded
record), `projects`, `sync_runs`.

A leaf module (pyarrow and the time type only): the local store, the lake store, the records
built by the walk, the exports and the SQL layer's empty relations all use these, and none of
them may be what another of them has to import first (issue 20: the storage import cycle).
"""

from __future__ import annotations

import pyarrow as pa

from exporter.core.timeutil import UTC_US

VERSIONS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("project_id", pa.string()),
        ("branch_id", pa.string()),
        ("endpoint_id", pa.string()),
        ("action", pa.string()),
        ("status", pa.string()),
        ("failures_count", pa.int64()),
        ("error", pa.string()),
        ("retry_at", UTC_US),
        ("created_at", UTC_US),
        ("updated_at", UTC_US),
        ("total_duration_ms", pa.int64()),
        ("raw", pa.string()),
        ("version", pa.int32()),
        ("observed_at", UTC_US),
        ("run_id", pa.string()),
        ("created_date", pa.date32()),  # UTC date of created_at (the partition is its month)
    ]
)

# The superseded record (DESIGN.md): `version` of operation `id` is no longer its latest state.
SUPERSEDED_SCHEMA = pa.schema([("id", pa.string()), ("version", pa.int32())])

# The report's flagged record (DESIGN.md): the versions not terminal or with an error text, with
# the columns the report's row-level sections read (sql/90_report.sql, report_rows).
FLAGGED_COLUMNS = (
    "id",
    "version",
    "project_id",
    "branch_id",
    "action",
    "status",
    "failures_count",
    "error",
    "total_duration_ms",
    "created_at",
    "updated_at",
    "created_date",
)
FLAGGED_SCHEMA = pa.schema([VERSIONS_SCHEMA.field(name) for name in FLAGGED_COLUMNS])

# The report's summary record (DESIGN.md; `store.local.summary`): per created month, what the
# report reads of every version, aggregated when the versions are committed. `measure` "group":
# one row per (project_id, branch_id, action) with its versions, failed, retries, terminal and
# the first and last created_at; "total_ms" / "wall_ms": an exact histogram of the terminal
# versions' total_duration_ms / wall time per action (`ms` a value, `versions` how many).
SUMMARY_SCHEMA = pa.schema(
    [
        ("month", pa.int32()),  # year * 100 + month of created_date
        ("measure", pa.string()),
        ("project_id", pa.string()),
        ("branch_id", pa.string()),
        ("action", pa.string()),
        ("ms", pa.int64()),
        ("versions", pa.int64()),
        ("failed", pa.int64()),
        ("retries", pa.int64()),
        ("terminal", pa.int64()),
        ("first_created_at", UTC_US),
        ("last_created_at", UTC_US),
    ]
)

PROJECTS_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("name", pa.string()),
        ("region_id", pa.string()),
        ("pg_version", pa.int64()),
        ("platform_id", pa.string()),
        ("provisioner", pa.string()),
        ("org_id", pa.string()),
        ("owner_id", pa.string()),
        ("created_at", UTC_US),
        ("updated_at", UTC_US),
        ("raw", pa.string()),
        ("first_seen_at", UTC_US),
        ("last_seen_at", UTC_US),
        ("deleted_at", UTC_US),
        ("last_synced_at", UTC_US),
        ("current_at", UTC_US),
        ("checkpoint_at", UTC_US),
        ("last_error", pa.string()),
        ("open_operations", pa.int64()),
    ]
)

SYNC_RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started_at", UTC_US),
        ("finished_at", UTC_US),
        ("outcome", pa.string()),
        ("projects_total", pa.int64()),
        ("projects_ok", pa.int64()),
        ("projects_failed", pa.int64()),
        ("requests", pa.int64()),
        ("responses_429", pa.int64()),
        ("retries", pa.int64()),
        ("new_operations", pa.int64()),
        ("changed_operations", pa.int64()),
        ("versions_written", pa.int64()),
        ("error", pa.string()),
        ("projects_left", pa.int64()),  # not reached or cut short: the next run continues
        ("coverage_hour", pa.float64()),  # share of projects walked within the hour
        ("coverage_day", pa.float64()),  # ... within the day
        ("oldest_lag_seconds", pa.float64()),  # since the stalest project's last walk
        ("open_unchecked_day", pa.int64()),  # open operations not re-read for a day
        ("achieved_rps", pa.float64()),  # requests per second over the run
        ("configured_rps", pa.float64()),  # the pacing it was given (NULL: unpaced)
    ]
)

__all__ = [
    "FLAGGED_COLUMNS",
    "FLAGGED_SCHEMA",
    "PROJECTS_SCHEMA",
    "SUMMARY_SCHEMA",
    "SUPERSEDED_SCHEMA",
    "SYNC_RUNS_SCHEMA",
    "VERSIONS_SCHEMA",
]
