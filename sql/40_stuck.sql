-- Stuck operations: not terminal (finished, cancelled, skipped) and created longer ago than a
-- threshold. Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/40_stuck.sql"
--     FROM stuck_operations;                                   -- threshold 1 hour, as of now
--     FROM stuck_operations_older_than(INTERVAL 6 HOURS);
--     FROM stuck_operations_older_than(INTERVAL 30 MINUTES, as_of := TIMESTAMPTZ '2025-01-16 12:00Z');
-- age = as_of - created_at, in UTC (00_base.sql's utc_age: the same in every TimeZone). "Now" is the newest state opsaudit knows: run a sync first.

CREATE OR REPLACE MACRO stuck_operations_older_than(threshold, as_of := NULL) AS TABLE
SELECT
    id, project_id, branch_id, endpoint_id, action, status, failures_count, error, retry_at,
    created_at, updated_at, observed_at,
    utc_age(created_at, coalesce(as_of::TIMESTAMPTZ, now())) AS age
FROM operations
WHERE NOT is_terminal(status)
  AND created_at < utc_before(coalesce(as_of::TIMESTAMPTZ, now()), threshold)
ORDER BY created_at, id;

CREATE OR REPLACE VIEW stuck_operations AS
FROM stuck_operations_older_than(INTERVAL 1 HOUR);
