-- Every queue at once: jobs per state (one row per state, queue and paused
-- NULL), then the queues stats are kept for and the paused ones (state NULL).
SELECT state, SUM(n), NULL, NULL FROM job_counts GROUP BY state
UNION ALL
SELECT NULL, NULL,
       (SELECT COUNT(*) FROM (
            SELECT queue FROM job_counts WHERE n <> 0
            UNION
            SELECT name FROM queues
            WHERE paused <> 0 OR max_leased IS NOT NULL OR rate_limit IS NOT NULL OR poison_after IS NOT NULL OR max_leased_per_group IS NOT NULL
                  OR keep_succeeded IS NOT NULL OR keep_dead IS NOT NULL OR keep_cancelled IS NOT NULL)),
       (SELECT COUNT(*) FROM queues WHERE paused <> 0)
