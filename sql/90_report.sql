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
    AND created_at < utc_before(
        coalesce(as_of::TIMESTAMPTZ, now()), coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR));

-- Whether a version (its created_date, created_at and project_id) lies in the window. Applied
-- to created_date too, so whole partitions and row groups are skipped.
CREATE OR REPLACE MACRO report_in_window(
    created_date, created_at, project_id, since, until, projects
) AS
    (since IS NULL OR created_date >= (since::TIMESTAMPTZ AT TIME ZONE 'UTC')::DATE)
    AND (since IS NULL OR created_at >= since::TIMESTAMPTZ)
    AND (until IS NULL OR created_date <= (until::TIMESTAMPTZ AT TIME ZONE 'UTC')::DATE)
    AND (until IS NULL OR created_at < until::TIMESTAMPTZ)
    AND (projects IS NULL OR list_contains(projects::VARCHAR[], project_id));

-- Latest states in the window: the versions in it minus the superseded record (00_base.sql's
-- `operations`, windowed). The record is small and needs no window (a pair outside it matches
-- nothing).
CREATE OR REPLACE MACRO report_versions(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    id, version, project_id, branch_id, action, status, failures_count, error,
    total_duration_ms, created_at, updated_at, created_date
FROM stored_operation_versions  -- no names joined: one scan, the report's speed
WHERE report_in_window(created_date, created_at, project_id, since, until, projects);

CREATE OR REPLACE MACRO report_operations(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT v.*
FROM report_versions(since := since, until := until, projects := projects) AS v
ANTI JOIN read_parquet('superseded/*.parquet') AS s ON v.id = s.id AND v.version = s.version;

-- The report's summary of a table of versions (`rel`, the columns of stored_operation_versions),
-- per created month (year * 100 + month): a 'group' row per (project, branch, action) with
-- every version's counts, first and last created_at; exact histograms of the terminal versions'
-- total_duration_ms ('total_ms') and wall time ('wall_ms') per action (`ms` a value, `versions`
-- how many). The sync writes the same rows when it commits the versions (the summary record,
-- DESIGN.md; exporter/store/local/summary.py); this derives them where a dataset has none and
-- for the partial months of a window.
CREATE OR REPLACE MACRO report_summary_of(rel) AS TABLE
WITH v AS (
    SELECT
        (year(created_date) * 100 + month(created_date))::INTEGER AS month,
        project_id, branch_id, action, failures_count, total_duration_ms,
        wall_ms(created_at, updated_at) AS wall, created_at, is_terminal(status) AS t
    FROM query_table(rel)
)
SELECT
    month, 'group' AS measure, project_id, branch_id, action, NULL::BIGINT AS ms,
    count(*) AS versions,
    count(*) FILTER (WHERE is_failed(failures_count)) AS failed,
    coalesce(sum(failures_count), 0)::BIGINT AS retries,
    count(*) FILTER (WHERE t) AS terminal,
    min(created_at) AS first_created_at,
    max(created_at) AS last_created_at
FROM v
GROUP BY month, project_id, branch_id, action
UNION ALL
SELECT
    month, 'total_ms', NULL, NULL, action, total_duration_ms, count(*), NULL, NULL, NULL, NULL,
    NULL
FROM v
WHERE t AND total_duration_ms IS NOT NULL
GROUP BY month, action, total_duration_ms
UNION ALL
SELECT month, 'wall_ms', NULL, NULL, action, wall, count(*), NULL, NULL, NULL, NULL, NULL
FROM v
WHERE t AND wall IS NOT NULL
GROUP BY month, action, wall;

-- Whether the dataset has the summary record (written by the sync, DESIGN.md): a dataset
-- without one (written before it and not migrated yet, object storage, several datasets read
-- together) reads it as empty, and the report summarises its rows instead. An empty record
-- counts as none: its dataset has no versions to summarise either way.
CREATE OR REPLACE MACRO report_summary_recorded() AS
    (SELECT count(*) > 0 FROM (SELECT 1 FROM read_parquet('summary/*.parquet') LIMIT 1));

-- Whether a created month (year * 100 + month) is read from the summary record: the dataset has
-- the record (`recorded`) and the month lies wholly in the window. A month the window cuts (and
-- any month when the window names projects: the histograms are per action, not per project) is
-- summarised from its rows.
CREATE OR REPLACE MACRO report_whole_month(m, since, until, projects, recorded) AS
    coalesce(recorded, report_summary_recorded())
    AND projects IS NULL
    AND (since IS NULL
        OR make_date(m // 100, m % 100, 1)::TIMESTAMP >= (since::TIMESTAMPTZ AT TIME ZONE 'UTC'))
    AND (until IS NULL
        OR make_date(m // 100, m % 100, 1) + INTERVAL 1 MONTH
            <= (until::TIMESTAMPTZ AT TIME ZONE 'UTC'));

-- The summary's total over all months (written after the commits,
-- exporter/analytics/summary_total.py): the sum of exactly the summary files committed now, its
-- rows without a month. Empty here: opsaudit's loader names the total of the files it reads
-- (exporter/analytics/views.py), which a reader by hand cannot tell from an outdated one.
CREATE OR REPLACE VIEW report_summary_total AS
SELECT
    NULL::INTEGER AS month, NULL::VARCHAR AS measure, NULL::VARCHAR AS project_id,
    NULL::VARCHAR AS branch_id, NULL::VARCHAR AS action, NULL::BIGINT AS ms,
    NULL::BIGINT AS versions, NULL::BIGINT AS failed, NULL::BIGINT AS retries,
    NULL::BIGINT AS terminal, NULL::TIMESTAMPTZ AS first_created_at,
    NULL::TIMESTAMPTZ AS last_created_at
WHERE false;

-- Whether the dataset has that total.
CREATE OR REPLACE MACRO report_summary_total_recorded() AS
    (SELECT count(*) > 0 FROM (SELECT 1 FROM report_summary_total LIMIT 1));

-- Whether report_summary reads the total: a window of all time (no bound, every project) over a
-- dataset with the record and its total (`recorded`, `total`: literals where they can be, so
-- the planner drops the scan it does not read; NULL: looked up).
CREATE OR REPLACE MACRO report_from_total(since, until, projects, recorded, total) AS
    since IS NULL AND until IS NULL AND projects IS NULL
    AND coalesce(recorded, report_summary_recorded())
    AND coalesce(total, report_summary_total_recorded());

-- The summary of every version in the window: its whole months from the record, the rest from
-- the rows (report_summary_of over report_versions). `recorded`: report_summary_recorded() (NULL:
-- looked up), as a literal where it can be (`opsaudit report` passes one: then a window of whole
-- months reads no row at all). A window of all time (no bound, every project) reads the record's
-- total instead of its months where there is one (`total`: report_summary_total_recorded(),
-- NULL: looked up; its rows have no month).
CREATE OR REPLACE MACRO report_summary(
    since := NULL, until := NULL, projects := NULL, recorded := NULL, total := NULL
) AS TABLE
WITH cut AS (
    -- No month: these rows are summed into the window's figures directly, and grouping them by
    -- month too would only make more groups.
    SELECT * REPLACE (NULL::DATE AS created_date)
    FROM report_versions(since := since, until := until, projects := projects)
    WHERE NOT report_whole_month(
        year(created_date) * 100 + month(created_date), since, until, projects, recorded
    )
)
SELECT * FROM read_parquet('summary/*.parquet')
WHERE report_whole_month(month, since, until, projects, recorded)
    AND NOT report_from_total(since, until, projects, recorded, total)
UNION ALL
SELECT * FROM report_summary_total
WHERE report_from_total(since, until, projects, recorded, total)
UNION ALL
FROM report_summary_of(cut);

-- The few rows of the window the row-level sections read, from one scan and one probe of the
-- record: the superseded versions (the counts and histograms subtract theirs from the summary
-- of every version), the versions not terminal (failing or stuck, when latest) and
-- the versions with an error text; `superseded` says which are not latest states. Reading every
-- id costs the most of a scan: `opsaudit report` keeps these rows in a temporary table and
-- passes it to the *_in macros below, so the ids are read once for these three sections (or
-- never: where the dataset has the flagged record it reads them there, report_flagged_rows).
CREATE OR REPLACE MACRO report_rows(since := NULL, until := NULL, projects := NULL) AS TABLE
SELECT
    v.id, v.version, v.project_id, v.branch_id, v.action, v.status, v.failures_count, v.error,
    v.total_duration_ms, v.created_at, v.updated_at, s.id IS NOT NULL AS superseded
FROM report_versions(since := since, until := until, projects := projects) AS v
LEFT JOIN (SELECT DISTINCT id, version FROM read_parquet('superseded/*.parquet')) AS s
    ON v.id = s.id AND v.version = s.version
WHERE s.id IS NOT NULL OR NOT is_terminal(v.status) OR (v.error IS NOT NULL AND v.error <> '');

-- Whether the dataset has the flagged record (written by the sync, DESIGN.md: every version not
-- terminal or with an error text, the rows report_rows keeps). As the summary record: one
-- written before it and not migrated yet, object storage or several datasets read it as empty,
-- and so does an empty record; the report then runs report_rows (the same rows, from every
-- version).
CREATE OR REPLACE MACRO report_flagged_recorded() AS
    (SELECT count(*) > 0 FROM (SELECT 1 FROM read_parquet('flagged/*.parquet') LIMIT 1));

-- report_rows from the flagged record instead of every version: the record's rows in the
-- window, each probed against the superseded record (both small). It holds every row
-- report_rows keeps but the superseded versions that are terminal and have no error text:
-- report_superseded_unflagged lists those (normally none: a version is superseded while it
-- runs), report_superseded_rows reads them from the versions (`opsaudit report` does both).
-- The record is joined as it is, not made distinct first: it holds each pair once (the one
-- commit that numbers version n+1 writes (id, n), DESIGN.md), as the record read here is one
-- dataset's (several read it as empty); a DISTINCT cost 0.02-0.03 s of a report at 10M.
CREATE OR REPLACE MACRO report_flagged_rows(since := NULL, until := NULL, projects := NULL)
AS TABLE
SELECT
    f.id, f.version, f.project_id, f.branch_id, f.action, f.status, f.failures_count, f.error,
    f.total_duration_ms, f.created_at, f.updated_at, s.id IS NOT NULL AS superseded
FROM read_parquet('flagged/*.parquet') AS f
LEFT JOIN read_parquet('superseded/*.parquet') AS s
    ON f.id = s.id AND f.version = s.version
WHERE report_in_window(f.created_date, f.created_at, f.project_id, since, until, projects);

-- report_flagged_rows of the whole dataset (no window) and, from the same join, the superseded
-- versions the record does not hold (report_superseded_unflagged): those rows have only their id
-- and version, and `superseded` NULL; `opsaudit report` reads them from the versions in their
-- place (report_superseded_rows). One join of the two records where two cost a third more.
CREATE OR REPLACE MACRO report_flagged_rows_whole() AS TABLE
SELECT
    coalesce(f.id, s.id) AS id, coalesce(f.version, s.version) AS version, f.project_id,
    f.branch_id, f.action, f.status, f.failures_count, f.error, f.total_duration_ms,
    f.created_at, f.updated_at,
    CASE WHEN f.present THEN s.id IS NOT NULL END AS superseded
FROM (SELECT *, true AS present FROM read_parquet('flagged/*.parquet')) AS f
FULL JOIN read_parquet('superseded/*.parquet') AS s
    ON f.id = s.id AND f.version = s.version;

-- The superseded versions the flagged record does not hold (terminal, no error text), as
-- (id, version) pairs of the whole dataset: two small records, no version read.
CREATE OR REPLACE MACRO report_superseded_unflagged() AS TABLE
SELECT DISTINCT s.id, s.version
FROM read_parquet('superseded/*.parquet') AS s
ANTI JOIN read_parquet('flagged/*.parquet') AS f ON s.id = f.id AND s.version = f.version;

-- The versions of the window among `pairs` (report_superseded_unflagged, a table of them) as
-- report_rows has them: what report_flagged_rows lacks. Reads every id of the window: run only
-- when there are pairs.
CREATE OR REPLACE MACRO report_superseded_rows(
    pairs, since := NULL, until := NULL, projects := NULL
) AS TABLE
SELECT
    v.id, v.version, v.project_id, v.branch_id, v.action, v.status, v.failures_count, v.error,
    v.total_duration_ms, v.created_at, v.updated_at, true AS superseded
FROM report_versions(since := since, until := until, projects := projects) AS v
SEMI JOIN query_table(pairs) AS p ON v.id = p.id AND v.version = p.version;

-- What on-call reads first: the operations failing now (latest status failed or error) and the
-- stuck ones (not terminal, not failing, created longer than stuck_after before as_of: still
-- running or waiting), as report_problems_in lists them but without their branches' names and
-- in no order: kind ('failing' or 'stuck'), the row, age at as_of, old (created longer than
-- stuck_after before as_of). Over report_rows (`rows`, a table or CTE of them).
CREATE OR REPLACE MACRO report_problems_of(rows, as_of := NULL, stuck_after := NULL) AS TABLE
SELECT
    CASE WHEN is_failing(status) THEN 'failing' ELSE 'stuck' END AS kind,
    id, project_id, branch_id, action, status, error,
    utc_age(created_at, coalesce(as_of::TIMESTAMPTZ, now())) AS age,
    created_at < utc_before(
        coalesce(as_of::TIMESTAMPTZ, now()), coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR)
    ) AS old
FROM query_table(rows)
WHERE NOT superseded AND (is_failing(status)
   OR (NOT is_terminal(status) AND created_at < utc_before(
        coalesce(as_of::TIMESTAMPTZ, now()), coalesce(stuck_after::INTERVAL, INTERVAL 1 HOUR))));

-- The two lists, oldest first (a failing operation is never also listed as stuck), each row
-- with its branch by name (the latest; branch_deleted_at once no longer listed), joined on the
-- few rows found, not on the operations.
CREATE OR REPLACE MACRO report_problems_in(rows, as_of := NULL, stuck_after := NULL) AS TABLE
SELECT
    p.kind, p.id, p.project_id, p.branch_id, b.name AS branch_name,
    b.deleted_at AS branch_deleted_at, p.action, p.status, p.error, p.age, p.old
FROM report_problems_of(rows, as_of := as_of, stuck_after := stuck_after) AS p
LEFT JOIN branches AS b ON b.id = p.branch_id
ORDER BY p.kind, p.age DESC, p.id;

-- The first `n` (1 to 999,999: min_by's bounds) rows of each list of report_problems_in, in its
-- order, and per list how many rows it holds (`total`) and how many of them are old
-- (`old_total`): what a terminal's table shows of 195k rows at 10M operations. One aggregate
-- per list keeps its n oldest (min_by over age descending, then id: a heap, no sort of the
-- list); the branches' names are joined on those rows. A list with no row has no row here.
CREATE OR REPLACE MACRO report_problems_top(rows, n, as_of := NULL, stuck_after := NULL)
AS TABLE
WITH lists AS (
    SELECT
        kind, count(*) AS total, count(*) FILTER (WHERE old) AS old_total,
        min_by(p, {'age': -epoch_us(age), 'id': id}, n) AS shown
    FROM report_problems_of(rows, as_of := as_of, stuck_after := stuck_after) AS p
    GROUP BY kind
), shown AS (
    SELECT kind, total, old_total, unnest(shown) AS p FROM lists
)
SELECT
    s.kind, s.total, s.old_total, s.p.id, s.p.project_id, s.p.branch_id,
    sb.name AS branch_name, sb.deleted_at AS branch_deleted_at, s.p.action, s.p.status,
    s.p.error, s.p.age, s.p.old
FROM shown AS s
LEFT JOIN branches AS sb ON sb.id = s.p.branch_id
ORDER BY s.kind, s.p.age DESC, s.p.id;

-- A value as orjson writes it in `opsaudit report --format json` (format.json_bytes): a string
-- as to_json escapes it (the same bytes but the hex case of a few control characters' \u
-- escapes, which the caller checks for), NULL as null.
CREATE OR REPLACE MACRO report_json_text(v) AS coalesce(to_json(v::VARCHAR)::VARCHAR, 'null');

-- An instant as format.jsonable writes it: ISO 8601 UTC with Z, microseconds only when there are.
CREATE OR REPLACE MACRO report_json_instant(ts) AS
    CASE WHEN ts IS NULL THEN 'null' ELSE
        '"' || strftime(ts::TIMESTAMPTZ AT TIME ZONE 'UTC', '%Y-%m-%dT%H:%M:%S')
        || CASE WHEN (epoch_us(ts) % 1000000 + 1000000) % 1000000 = 0 THEN ''
            ELSE '.' || lpad(((epoch_us(ts) % 1000000 + 1000000) % 1000000)::VARCHAR, 6, '0')
        END || 'Z"'
    END;

-- An age as the report's JSON writes it (`sec`: whole seconds), "PT90S" or "-PT5S".
CREATE OR REPLACE MACRO report_json_age(sec) AS
    CASE WHEN sec < 0 THEN '"-PT' || (-sec) || 'S"' ELSE '"PT' || sec || 'S"' END;

-- An age in microseconds (`us`) in whole seconds, rounded half to even as report_figures.problems
-- rounds them (Python's round(us / 1e6)); `rem`: us modulo a second (0 to 999,999).
CREATE OR REPLACE MACRO report_age_seconds(us, rem) AS
    (us - rem) // 1000000
    + CASE WHEN rem > 500000 OR (rem = 500000 AND ((us - rem) // 1000000) % 2 <> 0)
        THEN 1 ELSE 0 END;

-- report_problems_in as the JSON of `opsaudit report --format json` writes its two lists
-- (orjson, two-space indent, the lists at depth 1): a row's object as UTF-8 (a BLOB: no Python
-- str is made of it), in report_problems_in's order, with its kind and old. 195k rows at 10M
-- operations: one value each instead of a Python dict of nine (`report.build_report(
-- lists_as_json=True)` joins them, report_figures.problems_json).
CREATE OR REPLACE MACRO report_problems_json(rows, as_of := NULL, stuck_after := NULL) AS TABLE
SELECT
    kind, old,
    encode(concat(
        E'    {\n      "id": ', report_json_text(id),
        E',\n      "project_id": ', report_json_text(project_id),
        E',\n      "branch_id": ', report_json_text(branch_id),
        E',\n      "branch_name": ', report_json_text(branch_name),
        E',\n      "branch_deleted_at": ', report_json_instant(branch_deleted_at),
        E',\n      "action": ', report_json_text(action),
        E',\n      "status": ', report_json_text(status),
        E',\n      "error": ', report_json_text(error),
        E',\n      "age": ', report_json_age(report_age_seconds(us, rem)),
        E'\n    }'
    )) AS line
FROM (
    SELECT *, (us % 1000000 + 1000000) % 1000000 AS rem
    FROM (
        SELECT *, epoch_us(age) AS us
        FROM report_problems_in(rows, as_of := as_of, stuck_after := stuck_after)
    )
)
ORDER BY kind, age DESC, id;

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

-- The failure counts per (project, branch, action) of a window (`counts`: operations, failed,
-- retries, failing_now) rolled up per project, per branch and per branch and action (GROUPING
-- SETS) over those few groups, each branch by name (the join is on the groups, not on the
-- operations). grain: 'project', 'branch' (branch_id NULL: operations that name no branch) or
-- 'branch_action'.
CREATE OR REPLACE MACRO report_failure_rollup(counts) AS TABLE
WITH groups AS (
    SELECT
        CASE grouping(branch_id, action)
            WHEN 3 THEN 'project' WHEN 1 THEN 'branch' ELSE 'branch_action'
        END AS grain,
        project_id, branch_id, action,
        sum(operations)::BIGINT AS operations,
        sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries,
        sum(failing_now)::BIGINT AS failing_now
    FROM query_table(counts)
    GROUP BY GROUPING SETS ((project_id), (project_id, branch_id), (project_id, branch_id, action))
)
SELECT
    g.grain, g.project_id, g.branch_id, b.name AS branch_name, b.deleted_at,
    CASE WHEN g.grain = 'branch_action' THEN g.action END AS action,
    g.operations, g.failed, g.failed / g.operations AS failure_rate, g.retries, g.failing_now
FROM groups AS g
LEFT JOIN branches AS b ON b.id = g.branch_id
ORDER BY g.grain, g.failed DESC, g.operations DESC, g.project_id, g.branch_id, action;

-- The failure counts per (project, branch, action) of signed rows (`parts`: project_id,
-- branch_id, action, operations, failed, retries, failing_now; a superseded version's
-- subtracted), summed once, a group left with no operation dropped, then rolled up
-- (report_failure_rollup): what report_failure_groups_in and _scan share.
CREATE OR REPLACE MACRO report_failure_groups_of(parts) AS TABLE
WITH counts AS MATERIALIZED (
    SELECT
        project_id, branch_id, action,
        sum(operations)::BIGINT AS operations,
        sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries,
        sum(failing_now)::BIGINT AS failing_now
    FROM query_table(parts)
    GROUP BY project_id, branch_id, action
    HAVING sum(operations) > 0
)
FROM report_failure_rollup(counts);

-- Failures per project, per branch and per branch and action: the summary's counts per
-- (project, branch, action), then rolled up over those few groups (GROUPING SETS). grain:
-- 'project', 'branch' (branch_id NULL: operations that name no branch) or 'branch_action'.
-- Branches by name (names, not ids): branch_name is the latest known name (NULL: never listed),
-- deleted_at set once a listing of its project no longer had it; the join is on the few
-- groups, not on the operations.
-- `rows`: report_rows of a window, `summary`: report_summary of the same window. Counts are
-- sums, so the latest states' counts are every version's (the summary) minus the superseded
-- versions' (a group left with no operation is dropped); failing now is counted on the latest
-- states of `rows` (every failing version is one of them): nothing reads every version.
CREATE OR REPLACE MACRO report_failure_groups_in(rows, summary) AS TABLE
WITH parts AS (
    SELECT project_id, branch_id, action, versions AS operations, failed, retries,
        0 AS failing_now
    FROM query_table(summary)
    WHERE measure = 'group'
    UNION ALL
    SELECT
        project_id, branch_id, action, -1, -is_failed(failures_count)::INTEGER,
        -coalesce(failures_count, 0), 0
    FROM query_table(rows)
    WHERE superseded
    UNION ALL
    SELECT project_id, branch_id, action, 0, 0, 0, 1
    FROM query_table(rows)
    WHERE NOT superseded AND is_failing(status)
)
FROM report_failure_groups_of(parts);

CREATE OR REPLACE MACRO report_failure_groups(since := NULL, until := NULL, projects := NULL)
AS TABLE
WITH r AS (FROM report_rows(since := since, until := until, projects := projects)),
s AS (FROM report_summary(since := since, until := until, projects := projects))
FROM report_failure_groups_in(r, s);

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

-- report_by_action from report_rows (`rows`) and report_summary (`summary`) of the same window,
-- without reading every version: the counts are the summary's minus the superseded versions'
-- (as report_failure_groups_in); the quantiles come from the summary's exact histograms less
-- the superseded terminal versions' values, located as quantile_cont locates them: over the n
-- values sorted, position rn = (n - 1) * q for q in 0.5, 0.9, 0.99, its neighbours lo =
-- floor(rn) and hi = ceil(rn); ms_points / wall_points hold per q the values there and d = rn -
-- lo, and the caller interpolates them with quantile_cont itself (`quantile_cont([lo, hi], d)`,
-- the same arithmetic to the last bit: DuckDB's interpolation may be fused, which SQL
-- arithmetic cannot redo); maxima are the largest value left; failing now and stuck are
-- counted on the latest states of `rows` (every version not terminal is one of them). first
-- and last created_at are every version's in the window: first_exact / last_exact say whether
-- each is held by a latest state for certain (no superseded version holds it); where one is
-- false the caller checks it (`opsaudit report` does).
CREATE OR REPLACE MACRO report_by_action_in(
    rows, summary, as_of := NULL, stuck_after := NULL
) AS TABLE
WITH gone AS (
    SELECT *, is_terminal(status) AS t FROM query_table(rows) WHERE superseded
), counts AS (
    SELECT
        action,
        sum(versions)::BIGINT AS operations,
        sum(failed)::BIGINT AS failed,
        sum(retries)::BIGINT AS retries,
        sum(terminal)::BIGINT AS terminal,
        min(first_created_at) AS first_created_at,
        max(last_created_at) AS last_created_at
    FROM (
        SELECT action, versions, failed, retries, terminal, first_created_at, last_created_at
        FROM query_table(summary)
        WHERE measure = 'group'
        UNION ALL
        SELECT
            action, -1, -is_failed(failures_count)::INTEGER, -coalesce(failures_count, 0),
            -t::INTEGER, NULL, NULL
        FROM gone
    )
    GROUP BY action
), latest AS (
    SELECT
        action,
        count(*) FILTER (WHERE is_failing(status)) AS failing_now,
        count(*) FILTER (WHERE report_is_stuck(status, created_at, as_of, stuck_after)) AS stuck
    FROM query_table(rows)
    WHERE NOT superseded
    GROUP BY action
), hist AS (
    SELECT action, measure, ms, sum(versions) AS n
    FROM (
        SELECT action, measure, ms, versions FROM query_table(summary) WHERE measure <> 'group'
        UNION ALL
        SELECT action, 'total_ms', total_duration_ms, -1
        FROM gone
        WHERE t AND total_duration_ms IS NOT NULL
        UNION ALL
        SELECT action, 'wall_ms', wall_ms(created_at, updated_at), -1
        FROM gone
        WHERE t AND wall_ms(created_at, updated_at) IS NOT NULL
    )
    GROUP BY action, measure, ms
    HAVING sum(versions) > 0
), histograms AS (
    -- Each histogram's values and those of the histograms before it in (action, measure) order.
    SELECT
        action, measure, total,
        sum(total) OVER (ORDER BY action, measure ROWS UNBOUNDED PRECEDING) - total AS before
    FROM (SELECT action, measure, sum(n) AS total FROM hist GROUP BY action, measure)
), cumulative AS (
    -- One running sum over every histogram in (action, measure, ms) order, less the values of
    -- the histograms before each: a window partitioned by action and measure took twice as
    -- long (each of its few partitions sorted alone).
    SELECT h.action, h.measure, h.ms, h.upto - g.before AS upto
    FROM (
        SELECT
            action, measure, ms,
            sum(n) OVER (ORDER BY action, measure, ms ROWS UNBOUNDED PRECEDING) AS upto
        FROM hist
    ) AS h
    JOIN histograms AS g ON g.action IS NOT DISTINCT FROM h.action AND g.measure = h.measure
), positions AS (
    SELECT action, measure, k, rn, floor(rn)::BIGINT AS lo, ceil(rn)::BIGINT AS hi
    FROM (
        SELECT
            g.action, g.measure, q.k, (g.total - 1)::DOUBLE * q.q AS rn
        FROM histograms AS g
        CROSS JOIN (SELECT unnest([0.5, 0.9, 0.99]) AS q, unnest([1, 2, 3]) AS k) AS q
    )
), quantiles AS (
    SELECT
        p.action, p.measure,
        list(
            {'lo': p.lo_v, 'hi': p.hi_v, 'd': CASE WHEN p.lo = p.hi THEN 0 ELSE p.rn - p.lo END}
            ORDER BY p.k
        ) AS q,
        max(p.max_v) AS max_v
    FROM (
        SELECT
            p.action, p.measure, p.k, p.rn, p.lo, p.hi,
            min(c.ms) FILTER (WHERE c.upto > p.lo) AS lo_v,
            min(c.ms) FILTER (WHERE c.upto > p.hi) AS hi_v,
            max(c.ms) AS max_v
        FROM positions AS p
        JOIN cumulative AS c
            ON c.action IS NOT DISTINCT FROM p.action AND c.measure = p.measure
        GROUP BY p.action, p.measure, p.k, p.rn, p.lo, p.hi
    ) AS p
    GROUP BY p.action, p.measure
), extremes AS (
    SELECT
        c.action,
        count(*) FILTER (WHERE g.created_at = c.first_created_at) AS at_first,
        count(*) FILTER (WHERE g.created_at = c.last_created_at) AS at_last
    FROM counts AS c
    JOIN gone AS g ON g.action IS NOT DISTINCT FROM c.action
    GROUP BY c.action
)
SELECT
    c.action,
    c.operations,
    c.operations / sum(c.operations) OVER () AS share,
    c.failed,
    c.failed / c.operations AS failure_rate,
    c.retries,
    coalesce(l.failing_now, 0) AS failing_now,
    coalesce(l.stuck, 0) AS stuck,
    c.first_created_at,
    c.last_created_at,
    c.terminal,
    d.q AS ms_points,
    d.max_v AS max_ms,
    w.q AS wall_points,
    w.max_v AS wall_max_ms,
    coalesce(e.at_first, 0) = 0 AS first_exact,
    coalesce(e.at_last, 0) = 0 AS last_exact
FROM counts AS c
LEFT JOIN latest AS l ON l.action IS NOT DISTINCT FROM c.action
LEFT JOIN quantiles AS d ON d.action IS NOT DISTINCT FROM c.action AND d.measure = 'total_ms'
LEFT JOIN quantiles AS w ON w.action IS NOT DISTINCT FROM c.action AND w.measure = 'wall_ms'
LEFT JOIN extremes AS e ON e.action IS NOT DISTINCT FROM c.action
WHERE c.operations > 0
ORDER BY c.operations DESC, c.action;

-- report_failure_groups_in where the dataset has no summary record, or the window no whole
-- month: failure_counts (00_base.sql) per (project, branch, action) from one scan of every
-- version in the window, rolled up as report_failure_rollup says. `rows`: report_rows of the
-- same window. Counts are sums, so the latest states' counts are every version's minus the
-- superseded versions' (a group left with no operation is dropped): the scan of every version
-- reads no id and joins nothing.
CREATE OR REPLACE MACRO report_failure_groups_scan(
    rows, since := NULL, until := NULL, projects := NULL
) AS TABLE
WITH every AS (
    SELECT project_id, branch_id, action, failures_count, status
    FROM report_versions(since := since, until := until, projects := projects)
), gone AS (
    SELECT project_id, branch_id, action, failures_count, status
    FROM query_table(rows)
    WHERE superseded
), parts AS (
    SELECT project_id, branch_id, action, operations, failed, retries, failing_now
    FROM failure_counts(every)
    UNION ALL
    SELECT project_id, branch_id, action, -operations, -failed, -retries, -failing_now
    FROM failure_counts(gone)
)
FROM report_failure_groups_of(parts);

-- report_by_action_in where the dataset has no summary record, or the window no whole month,
-- from report_rows (`rows`, the same window) and one scan of every version, without probing
-- every id: the counts are every version's minus the superseded versions' (as
-- report_failure_groups_scan); durations, terminal counts and their maxima are every terminal
-- version's, and first and last created_at every version's. `exact` says whether that is the
-- latest states' figure: no superseded version of the window is terminal, and each extreme of
-- created_at is held by more versions than the superseded ones holding it (then one of them is
-- a latest state). Where it is false the caller runs report_by_action (`opsaudit report` does).
CREATE OR REPLACE MACRO report_by_action_scan(
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
