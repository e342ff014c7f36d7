-- The claim's candidates: the oldest due jobs without a group of each
-- class (READY, or SCHEDULED or RETRYING and not promoted yet), then the
-- grouped READY jobs of each class in turn order, up to $3 of each, whole
-- rows (a claim needs nothing more), in one round trip.
-- SKIP LOCKED: jobs another Relay process is claiming are passed over, so
-- processes never wait on each other; the rows returned stay locked until
-- this batch commits. Unless $4, nothing of a paused queue is read (or
-- locked): a batch's first flight reads its settings beside it, and a claim
-- skips it (a batch that resumes it reads it later, with $4). Columns as
-- job_get.sql, then `turn`.
SELECT h.*
FROM (VALUES (0::BIGINT), (1), (2), (3)) AS p(prio)
CROSS JOIN LATERAL (
    SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
           state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, turn
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
    SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
           state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, turn
    FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND queue = $1 AND priority = p.prio
      AND ($4::BOOLEAN OR NOT EXISTS (SELECT 1 FROM relay_queues q WHERE q.name = $1 AND q.paused))
    ORDER BY turn, id
    LIMIT $3
    FOR UPDATE SKIP LOCKED
) AS f
