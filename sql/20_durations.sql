-- Durations of terminal operations (finished, cancelled, skipped). Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/20_durations.sql"
--
-- Percentiles are quantile_cont: linear interpolation between the two nearest values
-- (PostgreSQL's percentile_cont, numpy's default), so p50 of (100, 200) is 150.
--   p50_ms .. max_ms          total_duration_ms as the platform reports it (NULLs ignored)
--   wall_p50_ms .. wall_max_ms updated_at - created_at in ms: queueing and retries included
-- Only terminal operations count: a running operation's duration is not final yet.

CREATE OR REPLACE VIEW duration_by_action AS
SELECT
    action,
    count(*) AS operations,
    count(total_duration_ms) AS with_duration,
    quantile_cont(total_duration_ms, 0.5) AS p50_ms,
    quantile_cont(total_duration_ms, 0.9) AS p90_ms,
    quantile_cont(total_duration_ms, 0.99) AS p99_ms,
    max(total_duration_ms) AS max_ms,
    quantile_cont(wall_ms(created_at, updated_at), 0.5) AS wall_p50_ms,
    quantile_cont(wall_ms(created_at, updated_at), 0.9) AS wall_p90_ms,
    quantile_cont(wall_ms(created_at, updated_at), 0.99) AS wall_p99_ms,
    max(wall_ms(created_at, updated_at)) AS wall_max_ms
FROM operations
WHERE is_terminal(status)
GROUP BY action
ORDER BY operations DESC, action;

-- The daily trend: the same per UTC day of created_at and action.
CREATE OR REPLACE VIEW duration_by_day AS
SELECT
    created_date AS day,
    action,
    count(*) AS operations,
    count(total_duration_ms) AS with_duration,
    quantile_cont(total_duration_ms, 0.5) AS p50_ms,
    quantile_cont(total_duration_ms, 0.9) AS p90_ms,
    quantile_cont(total_duration_ms, 0.99) AS p99_ms,
    max(total_duration_ms) AS max_ms,
    quantile_cont(wall_ms(created_at, updated_at), 0.5) AS wall_p50_ms,
    max(wall_ms(created_at, updated_at)) AS wall_max_ms
FROM operations
WHERE is_terminal(status)
GROUP BY created_date, action
ORDER BY day, action;
