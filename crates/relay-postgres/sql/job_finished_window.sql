-- The prune's window: the finished jobs among the $2 jobs after id $1 (a
-- range of the primary key: a pass reads a bounded window however few of
-- its jobs may go, and the next pass goes on after it), with their
-- queue's retention (NULL without a settings row), unlocked (the delete
-- checks each job again), and in every row the window's last id and how
-- many jobs it holds (fewer than $2: it reached the table's end); a
-- window without finished jobs answers one row of those alone. Columns as
-- decode::finished reads them, then the last id and the count at 6 and 7.
-- The parameters and ids are BIGINT whatever the column's type (a
-- hand-edited schema must not stop every batch's prune).
WITH w AS (
    SELECT id, queue, state, finished_at FROM relay_jobs WHERE id > $1::BIGINT ORDER BY id LIMIT $2::BIGINT
), last AS (
    SELECT MAX(id)::BIGINT AS id, COUNT(*) AS n FROM w
)
SELECT w.id::BIGINT, w.state, w.finished_at, q.keep_succeeded, q.keep_dead, q.keep_cancelled, last.id, last.n
FROM last
LEFT JOIN w ON w.state IN ('SUCCEEDED', 'DEAD', 'CANCELLED')
LEFT JOIN relay_queues AS q ON q.name = w.queue
ORDER BY w.id
