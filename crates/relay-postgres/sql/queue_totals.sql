-- Every queue at once: jobs per state (one row per state), then the queues
-- stats are kept for and the paused ones (state NULL).
SELECT state, SUM(n)::BIGINT, NULL::BIGINT, NULL::BIGINT FROM relay_job_counts GROUP BY state
UNION ALL
SELECT NULL, NULL,
       (SELECT COUNT(*) FROM (
            SELECT queue FROM relay_job_counts GROUP BY queue, state HAVING SUM(n) <> 0
            UNION
            SELECT name FROM relay_queues
            WHERE paused OR max_leased IS NOT NULL OR rate_limit IS NOT NULL OR poison_after IS NOT NULL OR max_leased_per_group IS NOT NULL
                   OR keep_succeeded IS NOT NULL OR keep_dead IS NOT NULL OR keep_cancelled IS NOT NULL) AS q),
       (SELECT COUNT(*) FROM relay_queues WHERE paused)
