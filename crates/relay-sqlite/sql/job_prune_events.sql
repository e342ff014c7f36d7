-- Finished jobs older than ?1 among the {PRUNE_SCAN} oldest ids (old jobs sit at the
-- front of the table: no index is needed, and a call never reads more than
-- that window, even when nothing is old enough); at most {PRUNE_BATCH} a call. The
-- same set as job_prune.sql, events first.
DELETE FROM job_events WHERE job_id IN (
    SELECT id FROM (SELECT id, state, finished_at FROM jobs ORDER BY id LIMIT {PRUNE_SCAN})
    WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < +?1
    LIMIT {PRUNE_BATCH})
