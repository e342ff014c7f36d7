-- The oldest due READY job of one class: one seek of jobs_ready (a claim
-- re-probes only the class it just took from). `+?N` as in job_ready_heads.
SELECT id, priority, ready_at FROM jobs
WHERE state = 'READY' AND queue = +?1 AND priority = +?2 AND ready_at <= +?3
ORDER BY ready_at, id LIMIT 1
