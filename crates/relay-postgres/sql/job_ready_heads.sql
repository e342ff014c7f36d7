-- The oldest due READY job of each class in one round trip: one probe of
-- relay_jobs_ready per class. SKIP LOCKED: a head another Relay process is
-- claiming is passed over, so processes never wait on each other.
SELECT h.id, h.priority, h.ready_at
FROM (VALUES (0::BIGINT), (1), (2), (3)) AS p(prio)
CROSS JOIN LATERAL (
    SELECT id, priority, ready_at FROM relay_jobs
    WHERE state = 'READY' AND queue = $1 AND priority = p.prio AND ready_at <= $2
    ORDER BY ready_at, id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS h
