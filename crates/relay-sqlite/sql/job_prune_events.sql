-- Finished jobs older than ?1 among the 5000 oldest ids (old jobs sit at the
-- front of the table: no index is needed, and a call never reads more than
-- that window, even when nothing is old enough); at most 1000 a call. The
-- same set as job_prune.sql, events first.
DELETE FROM job_events WHERE job_id IN (
    SELECT id FROM (SELECT id, state, finished_at FROM jobs ORDER BY id LIMIT 5000)
    WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < +?1
    LIMIT 1000)
