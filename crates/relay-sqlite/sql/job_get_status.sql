-- priority is read only to be checked: a transition never runs on a row
-- that does not decode strictly. The queue is for the counts (the writer
-- notes it for the batch's update).
SELECT state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error,
       priority, waiting_on, queue
FROM jobs WHERE id = ?1
