-- After a batch's updates, when they made two or more jobs READY: the
-- jobs ($1, in the batch's order) of a group and class that took turns
-- together get those turns again in the batch's order. The turn trigger
-- gives them one after another as the UPDATE writes their rows, in an
-- order of the plan's choosing (a hash join writes them in id order); the
-- batch's order is the engine's (a promotion pass: by time due), as
-- SQLite, which writes rows one by one, gives them. The set of turns is
-- unchanged, so no other group's order moves. (The jobs are read by their
-- ids, filtered outside: see apply_heads.sql.)
WITH u AS (
    SELECT j.id, j.queue, j.priority, j.grp, j.turn, u.ord
    FROM (SELECT id, queue, priority, grp, turn, state FROM relay_jobs WHERE id = ANY($1::BIGINT[]) OFFSET 0) AS j
    JOIN unnest($1::BIGINT[]) WITH ORDINALITY AS u(id, ord) ON u.id = j.id
    WHERE j.grp IS NOT NULL AND j.state = 'READY'
), by_ord AS (
    SELECT id, queue, priority, grp, row_number() OVER (PARTITION BY queue, priority, grp ORDER BY ord) AS k
    FROM u
), by_turn AS (
    SELECT turn, queue, priority, grp, row_number() OVER (PARTITION BY queue, priority, grp ORDER BY turn, id) AS k
    FROM u
)
UPDATE relay_jobs AS j SET turn = t.turn
FROM by_ord AS o JOIN by_turn AS t USING (queue, priority, grp, k)
WHERE j.id = o.id AND j.turn IS DISTINCT FROM t.turn
