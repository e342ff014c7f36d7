SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
       state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps
FROM relay_jobs WHERE id = $1
