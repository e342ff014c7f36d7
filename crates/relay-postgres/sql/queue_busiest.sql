-- The queues with the most READY jobs, most first, at most $1 (/metrics
-- labels only these).
SELECT queue FROM relay_job_counts WHERE state = 'READY'
GROUP BY queue HAVING SUM(n) > 0
ORDER BY SUM(n) DESC, queue COLLATE "C" LIMIT $1
