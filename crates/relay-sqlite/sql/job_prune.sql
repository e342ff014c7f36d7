-- Finished jobs older than ?1 among the {PRUNE_SCAN} oldest ids, at most
-- {PRUNE_BATCH} a call; answers each one's queue and state, for the counts.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM (SELECT id, state, finished_at FROM jobs ORDER BY id LIMIT {PRUNE_SCAN})
    WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < +?1
    LIMIT {PRUNE_BATCH})
RETURNING queue, state
