-- The guarded status write (and its event, if any) in one round trip. The event is
-- appended only when the guard matched (and a kind is given); the count
-- says whether it did.
WITH u AS (
    UPDATE relay_jobs
    SET state = $4, attempts = $5, ready_at = $6, finished_at = $7, lease_token = $8,
        lease_expires_at = $9, leased_by = $10, last_error = $11, result = COALESCE($12, result)
    WHERE id = $1 AND state = $2 AND lease_token = $3
    RETURNING id
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT id, COALESCE((SELECT MAX(seq) FROM relay_job_events WHERE job_id = $1), 0) + 1, $13, $14, $15
    FROM u
    WHERE $14::TEXT IS NOT NULL
)
SELECT COUNT(*) FROM u
