-- Expired leases with their statuses (columns as job_get_statuses.sql), for
-- the reap. SKIP LOCKED: whichever process gets to an expired lease first
-- reclaims it, exactly once. At most $2 (relay_store::REAP_BATCH).
SELECT id, state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by,
       last_error, priority, waiting_on
FROM relay_jobs
WHERE state = 'LEASED' AND lease_expires_at <= $1
ORDER BY lease_expires_at
LIMIT $2
FOR UPDATE SKIP LOCKED
