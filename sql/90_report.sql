-- The report behind `opsaudit report`: failures, durations and action mix per action, over a
-- time window and a set of projects. Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/90_report.sql"
--     FROM report_by_action();                                             -- everything
--     FROM report_failures(since := TIMESTAMPTZ '2025-01-01 00:00Z', projects := ['p-1']);
-- since (inclusive) and until (exclusive) bound created_at; projects is a list of project ids.
-- Omitted or NULL: no bound.

-- Stuck, in the report: not terminal, not failing (those are in failing_now) and created longer
-- than stuck_after (default 1 hour) before as_of (default now).
CREATE OR REPLACE MACRO report_is_stuck(status, created_at, as_of, stuck_after) AS
    NOT is_terminal(status) AND NOT is_failing(status)
    AND created_at < coalesce(as_of::TIMESTAMPTZ, now())
        - coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR);

-- Latest states in the window: the versions in it minus the superseded record (00_base.sql's
-- `operations`, windowed). The window is applied to created_date too, so whole partitions and
-- row groups are skipped; the record is small and needs no window (a pair outside it matches
-- nothing).
CREATE OR REPLACE MACRO report_versions(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    id, version, project_id, branch_id, action, status, failures_count, error,
    total_duration_ms, created_at, updated_at
FROM stored_operation_versions  -- no names joined: one scan, the report's speed
WHERE (since IS NULL OR created_date >= (since::TIMESTAMPTZ AT TIME ZONE 'UTC')::DATE)
  AND (since IS NULL OR created_at >= since::TIMESTAMPTZ)
  AND (until IS NULL OR created_date <= (until::TIMESTAMPTZ AT TIME ZONE 'UTC')::DATE)
  AND (until IS NULL OR created_at < until::TIMESTAMPTZ)
  AND (projects IS NULL OR list_contains(projects::VARCHAR[], project_id));

CREATE OR REPLACE MACRO report_operations(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT v.*
FROM report_versions(since := since, until := until, projects := projects) AS v
ANTI JOIN read_parquet('superseded/*.parquet') AS s ON v.id = s.id AND v.version = s.version;

-- The few rows of the window the row-level sections read, from one scan and one probe of the
-- record: the superseded versions (the per-project and per-branch counts subtract theirs from
-- the counts of every version), the versions not terminal (failing or stuck, when latest) and
-- the versions with an error text; `superseded` says which are not latest states. Reading every
-- id costs the most of a scan: `opsaudit report` keeps these rows in a temporary table and
-- passes it to the *_in macros below, so the ids are read once for these three sections.
CREATE OR REPLACE MACRO report_rows(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    v.id, v.version, v.project_id, v.branch_id, v.action, v.status, v.failures_count, v.error,
    v.created_at, v.updated_at, s.id IS NOT NULL AS superseded
FROM report_versions(since := since, until := until, projects := projects) AS v
LEFT JOIN (SELECT DISTINCT id, version FROM read_parquet('superseded/*.parquet')) AS s
    ON v.id = s.id AND v.version = s.version
WHERE s.id IS NOT NULL OR NOT is_terminal(v.status) OR (v.error IS NOT NULL AND v.error <> '');

-- What on-call reads first: the operations failing now (latest status failed or error) and the
-- stuck ones (not terminal, not failing, created longer than stuck_after before as_of: still
-- running or waiting), oldest first. A failing operation is never also listed as stuck. Each
-- with its branch by name (the latest; branch_deleted_at once no longer listed), joined on the
-- few rows found, not on the operations. Over report_rows (`rows`, a table or CTE of them).
CREATE OR REPLACE MACRO report_problems_in(rows, as_of := NULL, stuck_after := NULL) AS TABLE
SELECT
    p.kind, p.id, p.project_id, p.branch_id, b.name AS branch_name,
    b.deleted_at AS branch_deleted_at, p.action, p.status, p.error, p.age, p.old
FROM (
    SELECT
        CASE WHEN is_failing(status) THEN 'failing' ELSE 'stuck' END AS kind,
        id, project_id, branch_id, action, status, error,
        coalesce(as_of::TIMESTAMPTZ, now()) - created_at AS age,
        created_at < coalesce(as_of::TIMESTAMPTZ, now())
            - coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR) AS old
    FROM query_table(rows)
    WHERE NOT superseded AND (is_failing(status)
       OR (NOT is_terminal(status) AND created_at < coalesce(as_of::TIMESTAMPTZ, now())
            - coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR)))
) AS p
LEFT JOIN branches AS b ON b.id = p.branch_id
ORDER BY p.kind, p.age DESC, p.id;

CREATE OR REPLACE MACRO report_problems(
    since := NULL, until := NULL, projects := NULL, as_of := NULL, stuck_after := NULL
) AS TABLE
WITH r AS (FROM report_rows(since := since, until := until, projects := projects))
FROM report_problems_in(r, as_of := as_of, stuck_after := stuck_after);

-- The error texts operations in the window reported (in any of their states: a retry that
-- succeeded clears the error), most operations first; actions: the three that reported it
-- most, then how many more. Over report_rows (every version with an error is one of them).
CREATE OR REPLACE MACRO report_errors_in(rows) AS TABLE
WITH per_action AS (
    SELECT error, action, count(DISTINCT id) AS n, max(updated_at) AS last_seen
    FROM query_table(rows)
    WHERE error IS NOT NULL AND error <> ''
    GROUP BY error, action
)
SELECT
    error,
    sum(n)::BIGINT AS operations,  -- an operation has one action: no id is counted twice
    array_to_string(list_slice(list(action ORDER BY n DESC, action), 1, 3), ', ')
        || CASE WHEN count(*) > 3 THEN ' (+' || (count(*) - 3) || ' more)' ELSE '' END
        AS actions,
    max(last_seen) AS last_seen
FROM per_action
GROUP BY error
ORDER BY operations DESC, last_seen DESC, error;

CREATE OR REPLACE MACRO report_errors(since := NULL, until := NULL, projects := NULL) AS TABLE
WITH r AS (FROM report_rows(since := since, until := until, projects := projects))
FROM report_errors_in(r);

-- Failures per project, per branch and per branch and action, from one scan: failure_counts
-- (00_base.sql) per (project, branch, action), then rolled up over those few groups (GROUPING
-- SETS). grain: 'project', 'branch' (branch_id NULL: operations that name
-- no branch) or 'branch_action'. Branches by name (names, not ids): branch_name is the latest
-- known name (NULL: never listed), deleted_at set once a listing of its project no longer had
-- it; the join is on the few groups, not on the operations.
-- `rows`: report_rows of the same window. Counts are sums, so the latest states' counts are
-- every version's minus the superseded versions' (a group left with no operation is dropped):
-- the scan of every version reads no id and joins nothing.
CREATE OR REPLACE MACRO report_failure_groups_in(
    rows, since := NULL, until := NULL, projects := NULL
) AS TABLE
WITH every AS (
    SELECT project_id, branch_id, action, failures_count, status
    FROM report_versions(since := since, until := until, projects := projects)
), gone AS (
    SELECT project_id, branch_id, action, failures_count, status
    FROM query_table(rows)
    WHERE superseded
), counts AS MATERIALIZED (
    SELECT
        project_id, branch_id, action,
        sum(operations)::BIGINT AS operations,
        sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries,
        sum(failing_now)::BIGINT AS failing_now
    FROM (
        SELECT project_id, branch_id, action, operations, failed, retries, failing_now
        FROM failure_counts(every)
        UNION ALL
        SELECT
            project_id, branch_id, action, -operations, -failed, -retries, -failing_now
        FROM failure_counts(gone)
    )
    GROUP BY project_id, branch_id, action
    HAVING sum(operations) > 0
), groups AS (
    SELECT
        CASE grouping(branch_id, action)
            WHEN 3 THEN 'project' WHEN 1 THEN 'branch' ELSE 'branch_action'
        END AS grain,
        project_id, branch_id, action,
        sum(operations)::BIGINT AS operations,
        sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries,
        sum(failing_now)::BIGINT AS failing_now
    FROM counts
    GROUP BY GROUPING SETS ((project_id), (project_id, branch_id), (project_id, branch_id, action))
)
SELECT
    g.grain, g.project_id, g.branch_id, b.name AS branch_name, b.deleted_at,
    CASE WHEN g.grain = 'branch_action' THEN g.action END AS action,
    g.operations, g.failed, g.failed / g.operations AS failure_rate, g.retries, g.failing_now
FROM groups AS g
LEFT JOIN branches AS b ON b.id = g.branch_id
ORDER BY g.grain, g.failed DESC, g.operations DESC, g.project_id, g.branch_id, action;

CREATE OR REPLACE MACRO report_failure_groups(since := NULL, until := NULL, projects := NULL)
AS TABLE
WITH r AS (FROM report_rows(since := since, until := until, projects := projects))
FROM report_failure_groups_in(r, since := since, until := until, projects := projects);

CREATE OR REPLACE MACRO report_projects(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT project_id, operations, failed, failure_rate, retries, failing_now
FROM report_failure_groups(since := since, until := until, projects := projects)
WHERE grain = 'project'
ORDER BY failed DESC, operations DESC, project_id;

-- Failures per branch, by name; operations that name no branch are left out.
CREATE OR REPLACE MACRO report_branches(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    branch_name, branch_id, project_id, deleted_at, operations, failed, failure_rate, retries,
    failing_now
FROM report_failure_groups(since := since, until := until, projects := projects)
WHERE grain = 'branch' AND branch_id IS NOT NULL
ORDER BY failed DESC, operations DESC, project_id, branch_id;

-- Every number of the report in one pass over the data: one row per action. Vocabulary as in
-- 10_failures.sql, 20_durations.sql (quantile_cont, terminal operations only), 30_action_mix.sql
-- and 40_stuck.sql, but stuck = not terminal, not failing (those are in failing_now) and created
-- longer than stuck_after (default 1 hour) before as_of (default now).
CREATE OR REPLACE MACRO report_by_action(
    since := NULL, until := NULL, projects := NULL, as_of := NULL, stuck_after := NULL
) AS TABLE
SELECT
    action,
    operations,
    operations / sum(operations) OVER () AS share,
    failed,
    failed / operations AS failure_rate,
    retries,
    failing_now,
    stuck,
    first_created_at,
    last_created_at,
    terminal,
    q[1] AS p50_ms,
    q[2] AS p90_ms,
    q[3] AS p99_ms,
    max_ms,
    wq[1] AS wall_p50_ms,
    wq[2] AS wall_p90_ms,
    wq[3] AS wall_p99_ms,
    wall_max_ms
FROM (
    SELECT
        action,
        count(*) AS operations,
        count(*) FILTER (WHERE is_failed(failures_count)) AS failed,
        coalesce(sum(failures_count), 0)::BIGINT AS retries,
        count(*) FILTER (WHERE is_failing(status)) AS failing_now,
        count(*) FILTER (WHERE report_is_stuck(status, created_at, as_of, stuck_after)) AS stuck,
        min(created_at) AS first_created_at,
        max(created_at) AS last_created_at,
        count(*) FILTER (WHERE t) AS terminal,
        quantile_cont(total_duration_ms, [0.5, 0.9, 0.99]) FILTER (WHERE t) AS q,
        max(total_duration_ms) FILTER (WHERE t) AS max_ms,
        quantile_cont(wall_ms, [0.5, 0.9, 0.99]) FILTER (WHERE t) AS wq,
        max(wall_ms) FILTER (WHERE t) AS wall_max_ms
    FROM (
        SELECT
            action, status, failures_count, total_duration_ms, created_at,
            is_terminal(status) AS t,
            wall_ms(created_at, updated_at) AS wall_ms
        FROM report_operations(since := since, until := until, projects := projects)
    )
    GROUP BY action
)
ORDER BY operations DESC, action;

-- report_by_action from report_rows (`rows`, the same window) without probing every id: the
-- counts are every version's minus the superseded versions' (as report_failure_groups_in);
-- durations, terminal counts and their maxima are every terminal version's, and first and last
-- created_at every version's. `exact` says whether that is the latest states' figure: no
-- superseded version of the window is terminal, and each extreme of created_at is held by more
-- versions than the superseded ones holding it (then one of them is a latest state). Where it
-- is false the caller runs report_by_action (`opsaudit report` does).
CREATE OR REPLACE MACRO report_by_action_in(
    rows, since := NULL, until := NULL, projects := NULL, as_of := NULL, stuck_after := NULL
) AS TABLE
WITH every AS (
    SELECT
        action,
        count(*) AS operations,
        count(*) FILTER (WHERE is_failed(failures_count)) AS failed,
        coalesce(sum(failures_count), 0)::BIGINT AS retries,
        count(*) FILTER (WHERE is_failing(status)) AS failing_now,
        count(*) FILTER (WHERE report_is_stuck(status, created_at, as_of, stuck_after)) AS stuck,
        min(created_at, 3) AS firsts,
        max(created_at, 3) AS lasts,
        count(*) FILTER (WHERE t) AS terminal,
        quantile_cont(total_duration_ms, [0.5, 0.9, 0.99]) FILTER (WHERE t) AS q,
        max(total_duration_ms) FILTER (WHERE t) AS max_ms,
        quantile_cont(wall_ms, [0.5, 0.9, 0.99]) FILTER (WHERE t) AS wq,
        max(wall_ms) FILTER (WHERE t) AS wall_max_ms
    FROM (
        SELECT
            action, status, failures_count, total_duration_ms, created_at,
            is_terminal(status) AS t,
            wall_ms(created_at, updated_at) AS wall_ms
        FROM report_versions(since := since, until := until, projects := projects)
    )
    GROUP BY action
), gone AS (
    SELECT
        action,
        count(*) AS operations,
        count(*) FILTER (WHERE is_failed(failures_count)) AS failed,
        coalesce(sum(failures_count), 0)::BIGINT AS retries,
        count(*) FILTER (WHERE is_failing(status)) AS failing_now,
        count(*) FILTER (WHERE report_is_stuck(status, created_at, as_of, stuck_after)) AS stuck,
        count(*) FILTER (WHERE t) AS terminal,
        list(created_at) AS created
    FROM (SELECT *, is_terminal(status) AS t FROM query_table(rows) WHERE superseded)
    GROUP BY action
), latest AS (
    SELECT
        e.action,
        e.operations - coalesce(g.operations, 0) AS operations,
        e.failed - coalesce(g.failed, 0) AS failed,
        e.retries - coalesce(g.retries, 0) AS retries,
        e.failing_now - coalesce(g.failing_now, 0) AS failing_now,
        e.stuck - coalesce(g.stuck, 0) AS stuck,
        e.firsts[1] AS first_created_at,
        e.lasts[1] AS last_created_at,
        e.terminal,
        e.q, e.max_ms, e.wq, e.wall_max_ms,
        coalesce(g.terminal, 0) = 0
            AND coalesce(e.firsts[1 + coalesce(
                len(list_filter(g.created, lambda c: c = e.firsts[1])), 0)] = e.firsts[1], false)
            AND coalesce(e.lasts[1 + coalesce(
                len(list_filter(g.created, lambda c: c = e.lasts[1])), 0)] = e.lasts[1], false)
            AS exact
    FROM every AS e
    LEFT JOIN gone AS g ON g.action IS NOT DISTINCT FROM e.action
)
SELECT
    action,
    operations,
    operations / sum(operations) OVER () AS share,
    failed,
    failed / operations AS failure_rate,
    retries,
    failing_now,
    stuck,
    first_created_at,
    last_created_at,
    terminal,
    q[1] AS p50_ms,
    q[2] AS p90_ms,
    q[3] AS p99_ms,
    max_ms,
    wq[1] AS wall_p50_ms,
    wq[2] AS wall_p90_ms,
    wq[3] AS wall_p99_ms,
    wall_max_ms,
    exact
FROM latest
WHERE operations > 0
ORDER BY operations DESC, action;

-- The three sections of the report, as `opsaudit report --format json` prints them.
CREATE OR REPLACE MACRO report_failures(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT action, operations, failed, failure_rate, retries, failing_now
FROM report_by_action(since := since, until := until, projects := projects)
ORDER BY failed DESC, operations DESC, action;

CREATE OR REPLACE MACRO report_durations(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    action, terminal AS operations, p50_ms, p90_ms, p99_ms, max_ms,
    wall_p50_ms, wall_p90_ms, wall_p99_ms, wall_max_ms
FROM report_by_action(since := since, until := until, projects := projects)
WHERE terminal > 0
ORDER BY operations DESC, action;

CREATE OR REPLACE MACRO report_action_mix(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT action, operations, share
FROM report_by_action(since := since, until := until, projects := projects)
ORDER BY operations DESC, action;
