-- A batch's transitions of existing jobs, in one statement. Each is guarded by
-- the state and token the batch read (and locked): the count of rows changed
-- must be the number of transitions.
-- The count is checked in the statement (relay_expect, migration 0002): a
-- shortfall aborts the transaction before the COMMIT sent after it.
WITH w AS (
    UPDATE relay_jobs AS j
    SET state = u.state, attempts = u.attempts, ready_at = u.ready_at, finished_at = u.finished_at,
        lease_token = u.lease_token, lease_expires_at = u.lease_expires_at, leased_by = u.leased_by,
        last_error = u.last_error, result = COALESCE(u.result, j.result), waiting_on = u.waiting_on
    FROM unnest($1::BIGINT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[],
                $8::BIGINT[], $9::BIGINT[], $10::TEXT[], $11::TEXT[], $12::BYTEA[], $13::BIGINT[])
        AS u(id, expect_state, expect_token, state, attempts, ready_at, finished_at, lease_token, lease_expires_at,
             leased_by, last_error, result, waiting_on)
    WHERE j.id = u.id AND j.state = u.expect_state AND j.lease_token = u.expect_token
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $14, 'updates') FROM w
