-- Failures: what failed, where, when, and with which error. Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/10_failures.sql"
--
-- Vocabulary (one row per operation, its latest state):
--   failed        the operation failed at least once: failures_count > 0 (the platform retried it)
--   retries       sum of failures_count: how many attempts failed
--   failing_now   its latest status is 'failed' or 'error' (not over yet: 'failed' is retried)
--   failure_rate  failed / operations (0..1)

-- The counts are 00_base.sql's failure_counts, per action, project, branch and day.
CREATE OR REPLACE VIEW failures_by_action AS
WITH r AS (SELECT action, failures_count, status FROM operations)
FROM failure_counts(r)
ORDER BY failed DESC, operations DESC, action;

CREATE OR REPLACE VIEW failures_by_project AS
WITH r AS (SELECT project_id, failures_count, status FROM operations)
FROM failure_counts(r)
ORDER BY failed DESC, operations DESC, project_id;

-- Per branch, by name (names, not ids): branch_name is its latest known name (NULL: never
-- listed, e.g. deleted before the first sync), deleted_at when a listing stopped showing it.
-- Operations that name no branch are left out.
CREATE OR REPLACE VIEW failures_by_branch AS
WITH r AS (
    SELECT project_id, branch_id, failures_count, status FROM operations
    WHERE branch_id IS NOT NULL
)
SELECT
    f.project_id, f.branch_id, b.name AS branch_name, b.deleted_at,
    f.operations, f.failed, f.failure_rate, f.retries, f.failing_now
FROM failure_counts(r) AS f
LEFT JOIN branches AS b ON b.id = f.branch_id
ORDER BY f.failed DESC, f.operations DESC, f.branch_id;

-- Per UTC day of created_at (the partition date).
CREATE OR REPLACE VIEW failures_by_day AS
WITH r AS (SELECT created_date AS day, failures_count, status FROM operations)
FROM failure_counts(r)
ORDER BY day;

-- Operations whose latest status is 'failed' or 'error', newest first.
CREATE OR REPLACE VIEW failed_operations AS
SELECT
    id, project_id, branch_id, endpoint_id, action, status, failures_count, error, retry_at,
    created_at, updated_at
FROM operations
WHERE is_failing(status)
ORDER BY updated_at DESC, id;

-- Operations that needed retries (failures_count > 0), most retried first; versions = how
-- many distinct states opsaudit recorded for the operation.
CREATE OR REPLACE VIEW retried_operations AS
SELECT
    o.id, o.project_id, o.action, o.status, o.failures_count, coalesce(n.versions, 1) AS versions,
    o.error, o.created_at, o.updated_at
FROM operations AS o
LEFT JOIN (
    SELECT id, max(version) AS versions FROM operation_versions WHERE version > 1 GROUP BY id
) AS n ON n.id = o.id
WHERE is_failed(o.failures_count)
ORDER BY o.failures_count DESC, o.updated_at DESC, o.id;

-- The latest error text of each operation that ever reported one (an error may be cleared by
-- a successful retry, so it is looked up in every version), newest first. status is the
-- operation's current status.
CREATE OR REPLACE VIEW latest_errors AS
SELECT
    e.id, e.project_id, e.action, o.status, e.error, e.updated_at AS error_at, e.version
FROM (
    SELECT id, project_id, action, error, updated_at, version
    FROM operation_versions
    WHERE error IS NOT NULL AND error <> ''
    QUALIFY row_number() OVER (PARTITION BY id ORDER BY version DESC) = 1
) AS e
JOIN operations AS o ON o.id = e.id
ORDER BY error_at DESC, e.id;

-- Each distinct error text: how many operations reported it, on which actions, and when.
CREATE OR REPLACE VIEW error_texts AS
SELECT
    error,
    count(DISTINCT id) AS operations,
    list(DISTINCT action ORDER BY action) AS actions,
    min(updated_at) AS first_seen,
    max(updated_at) AS last_seen
FROM operation_versions
WHERE error IS NOT NULL AND error <> ''
GROUP BY error
ORDER BY last_seen DESC, error;
