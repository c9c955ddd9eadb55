-- Action mix: how many operations of each action, unknown actions and statuses included
-- (values are kept as the API sent them: PRODUCT.md). Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/30_action_mix.sql"
-- share is a fraction (0..1) of the operations in the same scope (all, the day, the project).

CREATE OR REPLACE VIEW action_mix AS
SELECT
    action,
    count(*) AS operations,
    count(*) / sum(count(*)) OVER () AS share
FROM operations
GROUP BY action
ORDER BY operations DESC, action;

CREATE OR REPLACE VIEW action_mix_by_day AS
SELECT
    created_date AS day,
    action,
    count(*) AS operations,
    count(*) / sum(count(*)) OVER (PARTITION BY created_date) AS share
FROM operations
GROUP BY created_date, action
ORDER BY day, operations DESC, action;

CREATE OR REPLACE VIEW action_mix_by_project AS
SELECT
    project_id,
    action,
    count(*) AS operations,
    count(*) / sum(count(*)) OVER (PARTITION BY project_id) AS share
FROM operations
GROUP BY project_id, action
ORDER BY project_id, operations DESC, action;

-- Latest statuses; terminal is false for every status that may still change, unknown ones too.
CREATE OR REPLACE VIEW status_mix AS
SELECT
    status,
    is_terminal(status) AS terminal,
    count(*) AS operations,
    count(*) / sum(count(*)) OVER () AS share
FROM operations
GROUP BY status
ORDER BY operations DESC, status;
