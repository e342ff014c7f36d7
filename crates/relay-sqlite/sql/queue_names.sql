-- The queues stats are kept for (with jobs, paused or limited), in byte
-- order, after ?1, at most ?2: a page of the queue list. Each side reads
-- no more than a page along its primary key, so a page costs the same
-- however many queues there are.
SELECT queue FROM (
    SELECT DISTINCT queue FROM job_counts WHERE n <> 0 AND queue > ?1 ORDER BY queue LIMIT ?2)
UNION
SELECT name FROM (
    SELECT name FROM queues
    WHERE (paused <> 0 OR max_leased IS NOT NULL OR rate_limit IS NOT NULL OR poison_after IS NOT NULL OR max_leased_per_group IS NOT NULL
                  OR keep_succeeded IS NOT NULL OR keep_dead IS NOT NULL OR keep_cancelled IS NOT NULL) AND name > ?1
    ORDER BY name LIMIT ?2)
ORDER BY 1 LIMIT ?2
