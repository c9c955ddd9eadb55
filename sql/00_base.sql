-- opsaudit base views: the dataset as four relations.
--
-- Run by hand from the data directory (paths below are relative to it):
--     cd <data-dir> && duckdb -c ".read /path/to/sql/00_base.sql" -c "FROM operations LIMIT 5"
-- or load every file in order: for f in /path/to/sql/*.sql; do ... -c ".read $f"; done.
-- opsaudit's loader (exporter/_sql.py) makes the quoted paths absolute and, for a source with
-- no file yet (an empty data dir), substitutes an empty relation of the same columns and types,
-- so every view answers 0 rows instead of failing.
--
-- Times are TIMESTAMPTZ in UTC. created_date (DATE) is the UTC date of created_at, stored in
-- each row; the files sit in Hive partitions operation_versions/created_month=YYYY-MM/, so a
-- filter on created_month skips whole months, one on created_date skips row groups.

-- Every distinct observed state of every operation (append-only; DESIGN.md). No union_by_name:
-- every file has the same schema (the sync writes one), and union_by_name would read the footer
-- of every file each time a view is bound (seconds over a 180-day history).
CREATE OR REPLACE VIEW operation_versions AS
SELECT
    id, project_id, branch_id, endpoint_id, action, status, failures_count, error, retry_at,
    created_at, updated_at, total_duration_ms, raw, version, observed_at, run_id, created_date
FROM read_parquet(
    'operation_versions/*/*.parquet',
    hive_partitioning = true, hive_types = {'created_month': VARCHAR}
);

-- The latest state of each operation: the versions minus the superseded ones. Every commit that
-- adds version n+1 of an operation writes (id, n) to superseded/ in the same commit (DESIGN.md,
-- the superseded record), so the anti-join's build side is a small file read, not a second scan
-- of every id. For a dataset without the record (written before it and not yet migrated by a
-- sync) the loader reads instead: SELECT id, version - 1 FROM operation_versions WHERE version > 1.
CREATE OR REPLACE VIEW operations AS
SELECT v.*
FROM operation_versions AS v
ANTI JOIN read_parquet('superseded/*.parquet') AS s ON v.id = s.id AND v.version = s.version;

-- Every project ever seen, deleted ones included (deleted_at is set for those).
CREATE OR REPLACE VIEW projects AS
SELECT
    id, name, region_id, pg_version, platform_id, provisioner, org_id, owner_id, created_at,
    updated_at, raw, first_seen_at, last_seen_at, deleted_at, last_synced_at, checkpoint_at,
    last_error, open_operations
FROM read_parquet('projects/projects.parquet');

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
