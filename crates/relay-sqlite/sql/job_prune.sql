-- Finished jobs older than ?1 among the 5000 oldest ids, at most 1000 a
-- call; answers each one's queue and state, for the counts.
DELETE FROM jobs WHERE id IN (
    SELECT id FROM (SELECT id, state, finished_at FROM jobs ORDER BY id LIMIT 5000)
    WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < +?1
    LIMIT 1000)
RETURNING queue, state
