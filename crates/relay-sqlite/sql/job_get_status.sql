-- priority is read only to be checked: a transition never runs on a row
-- that does not decode strictly.
SELECT state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error,
       priority, waiting_on
FROM jobs WHERE id = ?1
