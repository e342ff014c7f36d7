DELETE FROM relay_job_events WHERE job_id = $1
