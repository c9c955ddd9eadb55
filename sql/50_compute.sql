-- Compute activity: how long computes take to start, and how often they suspend and start
-- again. Needs 00_base.sql.
-- Run by hand: cd <data-dir> && duckdb -c ".read sql/00_base.sql" -c ".read sql/50_compute.sql"
-- Latency is total_duration_ms of finished start_compute operations; percentiles are
-- quantile_cont (linear interpolation), as in 20_durations.sql.

CREATE OR REPLACE VIEW compute_start_latency AS
SELECT
    count(*) AS operations,
    min(total_duration_ms) AS min_ms,
    quantile_cont(total_duration_ms, 0.5) AS p50_ms,
    quantile_cont(total_duration_ms, 0.9) AS p90_ms,
    quantile_cont(total_duration_ms, 0.99) AS p99_ms,
    max(total_duration_ms) AS max_ms,
    avg(total_duration_ms) AS mean_ms
FROM operations
WHERE action = 'start_compute' AND status = 'finished' AND total_duration_ms IS NOT NULL;

-- The distribution as a histogram with power-of-two buckets: [from_ms, to_ms).
CREATE OR REPLACE VIEW compute_start_latency_histogram AS
SELECT
    b AS bucket,
    CASE WHEN b = 0 THEN 0 ELSE 2 ** (b - 1) END::BIGINT AS from_ms,
    (2 ** b)::BIGINT AS to_ms,
    count(*) AS operations
FROM (
    SELECT CASE
        WHEN total_duration_ms <= 0 THEN 0
        ELSE floor(log2(total_duration_ms))::INTEGER + 1
    END AS b
    FROM operations
    WHERE action = 'start_compute' AND status = 'finished' AND total_duration_ms IS NOT NULL
)
GROUP BY b
ORDER BY b;

CREATE OR REPLACE VIEW compute_start_latency_by_day AS
SELECT
    created_date AS day,
    count(*) AS operations,
    quantile_cont(total_duration_ms, 0.5) AS p50_ms,
    quantile_cont(total_duration_ms, 0.9) AS p90_ms,
    quantile_cont(total_duration_ms, 0.99) AS p99_ms,
    max(total_duration_ms) AS max_ms
FROM operations
WHERE action = 'start_compute' AND status = 'finished' AND total_duration_ms IS NOT NULL
GROUP BY created_date
ORDER BY day;

-- Per endpoint and UTC day: suspend_compute and start_compute operations (any status), and
-- cycles = start_compute operations that directly follow a suspend_compute of the same
-- endpoint (ordered by created_at, then id), counted on the day of the start.
CREATE OR REPLACE VIEW compute_cycles AS
SELECT
    endpoint_id,
    any_value(project_id) AS project_id,
    created_date AS day,
    count(*) FILTER (WHERE action = 'suspend_compute') AS suspends,
    count(*) FILTER (WHERE action = 'start_compute') AS starts,
    count(*) FILTER (WHERE action = 'start_compute' AND previous = 'suspend_compute') AS cycles
FROM (
    SELECT
        endpoint_id, project_id, created_date, action,
        lag(action) OVER (PARTITION BY endpoint_id ORDER BY created_at, id) AS previous
    FROM operations
    WHERE action IN ('start_compute', 'suspend_compute') AND endpoint_id IS NOT NULL
)
GROUP BY endpoint_id, created_date
ORDER BY day, endpoint_id;
