-- The next page of one class of due jobs without a group, after (ready_at, id) =
-- (?4, ?5): one seek of jobs_ready. `+?N` as in job_ready_heads.sql; the
-- limit is a literal (a bound LIMIT re-prepares), replaced by sql.rs for
-- each page size.
SELECT id, priority, ready_at, NULL, NULL FROM jobs
WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = +?2 AND ready_at <= +?3 AND (ready_at, id) > (+?4, +?5)
ORDER BY ready_at, id LIMIT 1
