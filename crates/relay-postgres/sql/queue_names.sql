-- The queues stats are kept for (with jobs, paused or limited), in byte
-- order, after $1, at most $2: a page of the queue list. Each side reads
-- no more than a page along its byte-order index (migration 0011), so a
-- page costs the same however many queues there are.
SELECT name FROM (
    SELECT name FROM (
        SELECT queue COLLATE "C" AS name FROM relay_job_counts
        WHERE queue COLLATE "C" > $1
        GROUP BY queue COLLATE "C", state HAVING SUM(n) <> 0
    ) AS counted
    GROUP BY name ORDER BY name LIMIT $2
) AS with_jobs
UNION
SELECT name FROM (
    SELECT name COLLATE "C" AS name FROM relay_queues
    WHERE (paused OR max_leased IS NOT NULL OR rate_limit IS NOT NULL OR poison_after IS NOT NULL OR max_leased_per_group IS NOT NULL
                   OR keep_succeeded IS NOT NULL OR keep_dead IS NOT NULL OR keep_cancelled IS NOT NULL)
      AND name COLLATE "C" > $1
    ORDER BY 1 LIMIT $2
) AS with_settings
ORDER BY 1 LIMIT $2
