-- Locks the row for the rest of the batch's transaction: transitions of one
-- job from several Relay processes are applied one after the other.
SELECT state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error,
       priority, waiting_on
FROM relay_jobs WHERE id = $1
FOR UPDATE
