-- The next page of one class's candidates without a group, after (ready_at, id) = ($4, $5).
SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
       state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps, NULL::BIGINT AS turn
FROM relay_jobs
WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NULL AND queue = $1 AND priority = $2 AND ready_at <= $3 AND (ready_at, id) > ($4, $5)
ORDER BY ready_at, id
LIMIT $6
FOR UPDATE SKIP LOCKED
