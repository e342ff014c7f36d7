SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
       state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent
FROM relay_jobs
WHERE ($1::TEXT IS NULL OR queue = $1) AND ($2::TEXT IS NULL OR state = $2) AND ($3::BIGINT IS NULL OR id < $3)
ORDER BY id DESC
LIMIT $4
