INSERT INTO relay_job_events (job_id, seq, at, kind, data)
VALUES ($1, COALESCE((SELECT MAX(seq) FROM relay_job_events WHERE job_id = $1), 0) + 1, $2, $3, $4)
RETURNING seq
