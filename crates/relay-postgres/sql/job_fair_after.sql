-- The next page of one class of a queue's grouped READY jobs in turn
-- order, after (turn, id) = ($3, $4). Columns as job_ready.sql.
SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
           state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, turn
FROM relay_jobs
WHERE state = 'READY' AND grp IS NOT NULL AND queue = $1 AND priority = $2 AND (turn, id) > ($3, $4)
ORDER BY turn, id
LIMIT $5
FOR UPDATE SKIP LOCKED
