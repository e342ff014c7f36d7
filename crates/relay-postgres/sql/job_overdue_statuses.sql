-- What the reap reclaims or promotes, with their statuses (columns as
-- job_get_statuses.sql): LEASED jobs whose lease expired, in expiry order,
-- then SCHEDULED and RETRYING jobs whose time has come, in order of it,
-- then sleeping jobs (WAITING on no other job) whose time has come; at
-- most $2 (relay_store::REAP_BATCH) of each. SKIP LOCKED: whichever process
-- gets to one first reclaims (or promotes) it, exactly once.
WITH expired AS (
    SELECT id, state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by,
           last_error, priority, waiting_on
    FROM relay_jobs
    WHERE state = 'LEASED' AND lease_expires_at <= $1
    ORDER BY lease_expires_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), due AS (
    SELECT id, state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by,
           last_error, priority, waiting_on
    FROM relay_jobs
    WHERE state IN ('SCHEDULED', 'RETRYING') AND ready_at <= $1
    ORDER BY ready_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
), sleeping AS (
    SELECT id, state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by,
           last_error, priority, waiting_on
    FROM relay_jobs
    WHERE state = 'WAITING' AND waiting_on = 0 AND ready_at <= $1
    ORDER BY ready_at
    LIMIT $2
    FOR UPDATE SKIP LOCKED
)
SELECT * FROM expired
UNION ALL
SELECT * FROM due
UNION ALL
SELECT * FROM sleeping
