SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
       state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error,
       lease_for_ms, timeout_ms, waiting_on, traceparent
FROM jobs
WHERE (?1 IS NULL OR queue = ?1) AND (?2 IS NULL OR state = ?2) AND (?3 IS NULL OR id < ?3)
ORDER BY id DESC
LIMIT ?4
