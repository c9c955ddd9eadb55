-- opsaudit base views: operations, projects, runs, and the names of branches and computes.
--
-- Run by hand from the data directory (paths below are relative to it):
--     cd <data-dir> && duckdb -c ".read /path/to/sql/00_base.sql" -c "FROM operations LIMIT 5"
-- or load every file in order: for f in /path/to/sql/*.sql; do ... -c ".read $f"; done.
-- opsaudit's loader (exporter/analytics/views.py) makes the quoted paths absolute and, for a source with
-- no file yet (an empty data dir), substitutes an empty relation of the same columns and types,
-- so every view answers 0 rows instead of failing.
--
-- Times are TIMESTAMPTZ in UTC. created_date (DATE) is the UTC date of created_at, stored in
-- each row; the files sit in Hive partitions operation_versions/created_month=YYYY-MM/, so a
-- filter on created_month skips whole months, one on created_date skips row groups.

-- Every distinct observed state of every operation (append-only; DESIGN.md), as stored: no
-- names joined (the report's one pass reads this). No union_by_name:
-- every file has the same schema (the sync writes one), and union_by_name would read the footer
-- of every file each time a view is bound (seconds over a 180-day history).
CREATE OR REPLACE VIEW stored_operation_versions AS
SELECT
    id, project_id, branch_id, endpoint_id, action, status, failures_count, error, retry_at,
    created_at, updated_at, total_duration_ms, raw, version, observed_at, run_id, created_date
FROM read_parquet(
    'operation_versions/*/*.parquet',
    hive_partitioning = true, hive_types = {'created_month': VARCHAR}
);

-- Names, not ids (PRODUCT.md). Every branch / compute endpoint ever listed, deleted ones kept
-- (deleted_at: the first listing of its project without it); name = the latest known name.
CREATE OR REPLACE VIEW branches AS
SELECT
    id, project_id, name, parent_id, "default", protected, created_at, created_by,
    first_seen_at, last_seen_at, deleted_at
FROM read_parquet('branches/branches.parquet');

CREATE OR REPLACE VIEW endpoints AS
SELECT
    id, project_id, branch_id, name, type, autoscaling_limit_min_cu, autoscaling_limit_max_cu,
    suspend_timeout_seconds, created_at, first_seen_at, last_seen_at, deleted_at
FROM read_parquet('endpoints/endpoints.parquet');

-- Every distinct observed state of the tracked fields, valid from when it was observed until
-- the next one (valid_to NULL: the latest). Counters and live state are not versioned.
CREATE OR REPLACE VIEW branch_versions AS
SELECT id, project_id, version, name, parent_id, "default", protected, expires_at, valid_from,
    valid_to
FROM read_parquet('branch_versions/branch_versions.parquet');

CREATE OR REPLACE VIEW endpoint_versions AS
SELECT id, project_id, version, name, branch_id, type, autoscaling_limit_min_cu,
    autoscaling_limit_max_cu, suspend_timeout_seconds, disabled, pooler_enabled, valid_from,
    valid_to
FROM read_parquet('endpoint_versions/endpoint_versions.parquet');

-- Every distinct state of a project's listing fields (read in every run: no extra request).
-- default_endpoint_settings and settings are JSON text.
CREATE OR REPLACE VIEW project_versions AS
SELECT id, version, name, region_id, pg_version, provisioner, org_id, default_endpoint_settings,
    settings, history_retention_seconds, store_passwords, valid_from, valid_to
FROM read_parquet('project_versions/project_versions.parquet');

-- Every operation version with the names in effect when the operation was created: the name
-- version with valid_from <= created_at < valid_to; the earliest known one (its span open to
-- the past) for an operation created before the first listing; NULL for an id never listed.
-- The join's build side is the few name versions, probed once per row by id.
CREATE OR REPLACE VIEW operation_versions AS
SELECT v.*, b.name AS branch_name, e.name AS endpoint_name
FROM stored_operation_versions AS v
LEFT JOIN (
    SELECT id, name, CASE WHEN version > 1 THEN valid_from END AS since, valid_to AS until
    FROM branch_versions
) AS b
    ON v.branch_id = b.id
    AND (b.since IS NULL OR v.created_at >= b.since)
    AND (b.until IS NULL OR v.created_at < b.until)
LEFT JOIN (
    SELECT id, name, CASE WHEN version > 1 THEN valid_from END AS since, valid_to AS until
    FROM endpoint_versions
) AS e
    ON v.endpoint_id = e.id
    AND (e.since IS NULL OR v.created_at >= e.since)
    AND (e.until IS NULL OR v.created_at < e.until);

-- The latest state of each operation: the versions minus the superseded ones. Every commit that
-- adds version n+1 of an operation writes (id, n) to superseded/ in the same commit (DESIGN.md,
-- the superseded record), so the anti-join's build side is a small file read, not a second scan
-- of every id. For a dataset without the record (written before it and not yet migrated by a
-- sync) the loader reads instead: SELECT id, version - 1 FROM operation_versions WHERE version > 1.
CREATE OR REPLACE VIEW operations AS
SELECT v.*
FROM operation_versions AS v
ANTI JOIN read_parquet('superseded/*.parquet') AS s ON v.id = s.id AND v.version = s.version;

-- Every project ever seen, deleted ones included (deleted_at is set for those). current_at:
-- when its trail was last known complete (its last walk, or a later listing that showed it
-- idle, `--skip-idle`); a file an older opsaudit wrote has none: its last walk.
CREATE OR REPLACE VIEW projects AS
SELECT
    id, name, region_id, pg_version, platform_id, provisioner, org_id, owner_id, created_at,
    updated_at, raw, first_seen_at, last_seen_at, deleted_at, last_synced_at,
    coalesce((to_json(p) ->> 'current_at')::TIMESTAMPTZ, last_synced_at) AS current_at,
    checkpoint_at, last_error, open_operations
FROM read_parquet('projects/projects.parquet') AS p;

-- One row per sync run.
CREATE OR REPLACE VIEW sync_runs AS
SELECT
    run_id, started_at, finished_at, outcome, projects_total, projects_ok, projects_failed,
    requests, responses_429, retries, new_operations, changed_operations, versions_written, error
FROM read_parquet('sync_runs/sync_runs.parquet');

-- finished, cancelled and skipped end an operation; every other status, unknown ones included,
-- may still change ("failed" is retried by the platform: PRODUCT.md, Correctness 2).
CREATE OR REPLACE MACRO is_terminal(status) AS
    coalesce(status IN ('finished', 'cancelled', 'skipped'), false);

-- The rest of the vocabulary every view, the report and the checks use (one definition each):
-- failed: the operation failed at least once (failures_count > 0: the platform retried it).
CREATE OR REPLACE MACRO is_failed(failures_count) AS coalesce(failures_count > 0, false);
-- failing now: its latest status is 'failed' or 'error' (not over yet: 'failed' is retried).
CREATE OR REPLACE MACRO is_failing(status) AS coalesce(status IN ('failed', 'error'), false);
-- wall time in ms: updated_at - created_at, queueing and retries included (whole ms, floored).
CREATE OR REPLACE MACRO wall_ms(created_at, updated_at) AS
    (epoch_us(updated_at) - epoch_us(created_at)) // 1000;
-- Time arithmetic the same in every session TimeZone (`duckdb opsaudit.duckdb` runs in the
-- machine's zone, opsaudit in UTC): TIMESTAMPTZ minus TIMESTAMPTZ, or minus an INTERVAL of days,
-- counts days in the session's zone, an hour off across a DST change. These count in UTC.
-- utc_age(since, upto): upto - since, days and time as UTC counts them.
CREATE OR REPLACE MACRO utc_age(since, upto) AS
    (upto::TIMESTAMPTZ AT TIME ZONE 'UTC') - (since::TIMESTAMPTZ AT TIME ZONE 'UTC');
-- utc_before(ts, span): the instant `span` (an INTERVAL) before ts, days and months of UTC.
CREATE OR REPLACE MACRO utc_before(ts, span) AS
    ((ts::TIMESTAMPTZ AT TIME ZONE 'UTC') - span::INTERVAL) AT TIME ZONE 'UTC';
-- The failure counts of a table of operations, written once (10_failures.sql, 90_report.sql):
-- `rel` names a view or CTE of the key columns plus failures_count and status; one row per key
-- (every other column): operations, failed (at least once), failure_rate, retries (the failed
-- attempts), failing_now.
--     WITH r AS (SELECT action, failures_count, status FROM operations) FROM failure_counts(r)
CREATE OR REPLACE MACRO failure_counts(rel) AS TABLE
SELECT
    * EXCLUDE (failures_count, status),
    count(*) AS operations,
    count(*) FILTER (WHERE is_failed(failures_count)) AS failed,
    count(*) FILTER (WHERE is_failed(failures_count)) / count(*) AS failure_rate,
    coalesce(sum(failures_count), 0)::BIGINT AS retries,
    count(*) FILTER (WHERE is_failing(status)) AS failing_now
FROM query_table(rel)
GROUP BY ALL;
