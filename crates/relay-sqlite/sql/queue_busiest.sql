-- The queues with the most READY jobs, most first, at most ?1 (/metrics
-- labels only these).
SELECT queue FROM job_counts WHERE state = 'READY' AND n > 0 ORDER BY n DESC, queue LIMIT ?1
