-- The prune's window: the finished jobs among the {PRUNE_SCAN} jobs after id ?1 (a
-- range of the primary key: a pass reads a bounded window however few of
-- its jobs may go, and the next pass goes on after it), with their
-- queue's retention (NULL without a settings row). Columns as
-- decode::finished reads them.
SELECT w.id, w.state, w.finished_at, q.keep_succeeded, q.keep_dead, q.keep_cancelled
FROM (SELECT id, queue, state, finished_at FROM jobs WHERE id > ?1 ORDER BY id LIMIT {PRUNE_SCAN}) AS w
LEFT JOIN queues AS q ON q.name = w.queue
WHERE w.state IN ('SUCCEEDED', 'DEAD', 'CANCELLED')
ORDER BY w.id
