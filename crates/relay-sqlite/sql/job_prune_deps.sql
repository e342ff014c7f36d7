-- The edges from the jobs job_prune.sql deletes (the same set; run before it).
DELETE FROM job_deps WHERE parent IN (
    SELECT id FROM (SELECT id, state, finished_at FROM jobs ORDER BY id LIMIT {PRUNE_SCAN})
    WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < +?1
    LIMIT {PRUNE_BATCH})
