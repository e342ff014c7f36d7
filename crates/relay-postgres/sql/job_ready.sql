-- The claim's candidates: the oldest due jobs without a group of each
-- class (READY, or SCHEDULED or RETRYING and not promoted yet), then the
-- heads of each class's groups (relay_group_heads: each group's first
-- READY job) in turn order, up to $3 of each, whole rows (a claim needs
-- nothing more), in one round trip. A group's row is its first READY job
-- this transaction can lock: the head, or when another transaction holds
-- that, the next of the line (so a group's jobs are claimed by several
-- transactions at once); when it can lock none, a row of nulls but the
-- head's key (`head_turn`, `head_id`, `head_grp`, `head_priority`: the
-- page's keyset).
-- SKIP LOCKED: jobs another Relay process is claiming are passed over, so
-- processes never wait on each other; the rows returned stay locked until
-- this batch commits. Unless $4, nothing of a paused queue is read (or
-- locked): a batch's first flight reads its settings beside it, and a claim
-- skips it (a batch that resumes it reads it later, with $4). Columns as
-- job_get.sql, then `turn`, then the head's key (null for a job without a
-- group).
SELECT h.*, NULL::BIGINT AS head_turn, NULL::BIGINT AS head_id, NULL::TEXT AS head_grp, NULL::BIGINT AS head_priority
FROM (VALUES (0::BIGINT), (1), (2), (3)) AS p(prio)
CROSS JOIN LATERAL (
    SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
           state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps, turn
    FROM relay_jobs
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NULL AND queue = $1 AND priority = p.prio
      AND ready_at <= $2
      AND ($4::BOOLEAN OR NOT EXISTS (SELECT 1 FROM relay_queues q WHERE q.name = $1 AND q.paused))
    ORDER BY ready_at, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
) AS h
UNION ALL
SELECT f.*
FROM (VALUES (0::BIGINT), (1), (2), (3)) AS p(prio)
CROSS JOIN LATERAL (
    SELECT x.*, g.turn AS head_turn, g.job AS head_id, g.grp AS head_grp, p.prio AS head_priority
    FROM (SELECT turn, job, grp FROM relay_group_heads
          WHERE queue = $1 AND priority = p.prio
            AND ($4::BOOLEAN OR NOT EXISTS (SELECT 1 FROM relay_queues q WHERE q.name = $1 AND q.paused))
          ORDER BY turn, job
          LIMIT $3) AS g
    LEFT JOIN LATERAL (
        SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
               state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps, turn
        FROM relay_jobs j
        WHERE j.state = 'READY' AND j.grp IS NOT NULL AND j.queue = $1 AND j.priority = p.prio AND j.grp = g.grp
        ORDER BY j.turn, j.id
        LIMIT 1
        FOR UPDATE SKIP LOCKED
    ) AS x ON true
    ORDER BY g.turn, g.job
) AS f
-- Read once: a queue without grouped READY jobs costs no probe of the
-- heads (four of them, empty, cost the lease path some 7% without groups).
WHERE EXISTS (SELECT 1 FROM relay_group_heads WHERE queue = $1)
