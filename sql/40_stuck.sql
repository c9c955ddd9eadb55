-- Stuck operations: not terminal (finished, cancelled, skipped) and created longer ago than a
-- threshold, of projects not deleted. Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/40_stuck.sql"
--     FROM stuck_operations;                                   -- threshold 1 hour, as of now
--     FROM stuck_operations_older_than(INTERVAL 6 HOURS);
--     FROM stuck_operations_older_than(INTERVAL 30 MINUTES, as_of := TIMESTAMPTZ '2025-01-16 12:00Z');
--     FROM stuck_operations_older_than(INTERVAL 1 HOUR, deleted := true);  -- deleted projects' too
-- age = as_of - created_at, in UTC (00_base.sql's utc_age: the same in every TimeZone). "Now" is the newest state opsaudit knows: run a sync first.

-- A deleted project's operations are left out: nobody can re-read them, so an alert on them
-- could never clear (as `check`'s open_not_reread and the open-operations counts leave them out).
-- `deleted := true` lists them too, their last known state, `project_deleted_at` set.
CREATE OR REPLACE MACRO stuck_operations_older_than(threshold, as_of := NULL, deleted := false)
AS TABLE
SELECT
    o.id, o.project_id, o.branch_id, o.endpoint_id, o.action, o.status, o.failures_count,
    o.error, o.retry_at, o.created_at, o.updated_at, o.observed_at,
    utc_age(o.created_at, coalesce(as_of::TIMESTAMPTZ, now())) AS age,
    p.deleted_at AS project_deleted_at
FROM operations AS o
LEFT JOIN projects AS p ON p.id = o.project_id
WHERE NOT is_terminal(o.status)
  AND o.created_at < utc_before(coalesce(as_of::TIMESTAMPTZ, now()), threshold)
  AND (deleted OR p.deleted_at IS NULL)
ORDER BY o.created_at, o.id;

CREATE OR REPLACE VIEW stuck_operations AS
FROM stuck_operations_older_than(INTERVAL 1 HOUR);
