-- apply_update.sql for a batch of one transition and
-- its event (a lone lease, ack, nack, snooze or extend: the common case), in one
-- statement with scalar parameters instead of two over one-element arrays
-- through unnest. The same guard (state and token as the batch read them)
-- and the same counts: a shortfall aborts the transaction before the COMMIT
-- sent after it. The event is numbered as in apply_update.sql, from the
-- row's last_seq, which the update moves on.
-- $1-$13: id, expected state and token, then the new state, attempts,
-- ready_at, finished_at, lease token, lease expiry, leased_by, last_error,
-- result (NULL keeps it), waiting_on; $14-$16 the throughput counts and $17
-- their minute; $18-$22 the event's base, place, time, kind and data (as
-- apply_events.sql); $23 whether there is an event (an extend writes none).
WITH w AS (
    UPDATE relay_jobs AS j
    SET state = $4::TEXT, attempts = $5::BIGINT, ready_at = $6::BIGINT, finished_at = $7::BIGINT,
        lease_token = $8::BIGINT, lease_expires_at = $9::BIGINT, leased_by = $10::TEXT, last_error = $11::TEXT,
        result = COALESCE($12::BYTEA, j.result), waiting_on = $13::BIGINT,
        last_seq = CASE WHEN $23::BOOLEAN
                   THEN COALESCE($18::BIGINT, j.last_seq,
                                 (SELECT MAX(seq) FROM relay_job_events WHERE job_id = $1::BIGINT), 0) + $19::BIGINT
                   ELSE j.last_seq END
    WHERE j.id = $1::BIGINT AND j.state = $2::TEXT AND j.lease_token = $3::BIGINT
    RETURNING j.queue, j.last_seq
), t AS (
    INSERT INTO relay_throughput (minute, queue, shard, succeeded, failed, dead)
    SELECT $17::BIGINT, queue, pg_backend_pid(), $14::BIGINT, $15::BIGINT, $16::BIGINT
    FROM w WHERE $14::BIGINT + $15::BIGINT + $16::BIGINT > 0
    ON CONFLICT (minute, queue, shard) DO UPDATE SET
        succeeded = relay_throughput.succeeded + excluded.succeeded,
        failed = relay_throughput.failed + excluded.failed,
        dead = relay_throughput.dead + excluded.dead
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT $1::BIGINT, w.last_seq, $20::BIGINT, $21::TEXT, $22::TEXT
    FROM w WHERE $23::BOOLEAN
    RETURNING 1
)
SELECT relay_expect((SELECT COUNT(*) FROM w), 1, 'updates')
     + relay_expect((SELECT COUNT(*) FROM e), CASE WHEN $23::BOOLEAN THEN 1 ELSE 0 END, 'events')
