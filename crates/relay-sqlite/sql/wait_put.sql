-- A job's wait for an event, written whole (a job waits for one at a time).
INSERT OR REPLACE INTO waits (job_id, key, step, until) VALUES (?1, ?2, ?3, ?4)
