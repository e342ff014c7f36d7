SELECT COALESCE(MAX(seq), 0) FROM relay_job_events WHERE job_id = $1
