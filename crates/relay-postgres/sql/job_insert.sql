-- The new job and, when a kind is given, its first event (seq 1) in one
-- round trip.
WITH j AS (
    INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            unique_key, lease_token)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
    RETURNING id
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT id, 1, $12, $13, $14
    FROM j
    WHERE $13::TEXT IS NOT NULL
)
SELECT id FROM j
