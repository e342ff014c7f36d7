-- The new job and, when a kind is given, its first event (seq 1) in one
-- round trip. No row when another transaction holds the unique key: a
-- concurrent submit with the same key (another process) committed first,
-- or is in flight and this insert waited for it; the caller then looks the
-- holder up instead of failing the batch on a unique violation.
WITH j AS (
    INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            unique_key, lease_token)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('READY', 'LEASED') DO NOTHING
    RETURNING id
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT id, 1, $12, $13, $14
    FROM j
    WHERE $13::TEXT IS NOT NULL
)
SELECT id FROM j
