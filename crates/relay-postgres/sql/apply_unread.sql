-- A batch of one transition (and its event, if any) planned from a status the
-- batch did not read (the one this process wrote when it leased the job:
-- a lone ack, nack, snooze or extend by the lease's holder, planned without the
-- round trip of a read). Its guard is every column of that status, and no
-- job waiting for this one (the plan assumed none): where the row is
-- otherwise, nothing is written (no event, no count) and the statement
-- answers 0, and the writer plans the batch again from a read. Sent after
-- job_lock.sql in the same transaction (see there). The event is numbered
-- as in apply_update.sql, from the row's last_seq, which the update moves on.
-- $1-$13 as apply_update_one.sql's (the new status); $14-$16 the throughput
-- counts, $17 their minute; $18-$22 the event and $23 whether there is one
-- (an extend writes none); $24-$31 the rest of the status planned from:
-- attempts, max_attempts, ready_at, finished_at, lease expiry, leased_by,
-- last_error, waiting_on; $32 whether to NOTIFY.
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
      AND j.attempts = $24::BIGINT AND j.max_attempts = $25::BIGINT AND j.ready_at = $26::BIGINT
      AND j.finished_at IS NOT DISTINCT FROM $27::BIGINT AND j.lease_expires_at IS NOT DISTINCT FROM $28::BIGINT
      AND j.leased_by IS NOT DISTINCT FROM $29::TEXT AND j.last_error IS NOT DISTINCT FROM $30::TEXT
      AND j.waiting_on = $31::BIGINT
      AND NOT EXISTS (SELECT 1 FROM relay_job_deps AS d WHERE d.parent = $1::BIGINT)
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
), n AS (
    SELECT pg_notify('relay_ready', '') FROM w WHERE $32::BOOLEAN
)
SELECT (SELECT COUNT(*) FROM w)
     + 0 * relay_expect((SELECT COUNT(*) FROM e), CASE WHEN $23::BOOLEAN THEN (SELECT COUNT(*) FROM w) ELSE 0 END, 'events')
     + 0 * (SELECT COUNT(*) FROM n)
