-- job_set_status.sql for a transition the counts or the throughput history
-- see (the state changes, or an attempt ended): the same guarded update,
-- answering the job's queue (the batch may not have read it).
UPDATE jobs
SET state = ?4, attempts = ?5, ready_at = ?6, finished_at = ?7, lease_token = ?8,
    lease_expires_at = ?9, leased_by = ?10, last_error = ?11, result = COALESCE(?12, result), waiting_on = ?13
WHERE id = ?1 AND state = ?2 AND lease_token = ?3
RETURNING queue
