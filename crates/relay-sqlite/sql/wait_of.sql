-- A job's wait for an event, if it has one.
SELECT key, step, until FROM waits WHERE job_id = ?1
