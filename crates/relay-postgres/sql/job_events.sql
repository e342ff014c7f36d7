SELECT seq, at, kind, data FROM relay_job_events WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT $3
