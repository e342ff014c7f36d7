DELETE FROM job_events WHERE job_id = ?1
