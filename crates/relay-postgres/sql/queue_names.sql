-- The queues stats are kept for (with jobs, paused or limited), in byte
-- order, after $1, at most $2: a page of the queue list.
SELECT name FROM (
    SELECT queue AS name FROM relay_job_counts
    WHERE queue COLLATE "C" > $1
    GROUP BY queue, state HAVING SUM(n) <> 0
    UNION
    SELECT name FROM relay_queues
    WHERE (paused OR max_leased IS NOT NULL OR rate_limit IS NOT NULL) AND name COLLATE "C" > $1
) AS q
ORDER BY name COLLATE "C" LIMIT $2
