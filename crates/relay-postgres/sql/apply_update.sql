-- A batch's transitions of existing jobs and their events, in one statement.
-- Each is guarded by the state and token the batch read (and locked): the
-- count of rows changed must be the number of transitions.
-- The count is checked in the statement (relay_expect, migration 0002): a
-- shortfall aborts the transaction before the COMMIT sent after it.
-- Acks and failed attempts ($15-$17 per job) are counted in the throughput
-- history's minute $18 under the job's queue, read by the update itself.
-- Events ($21-$25: job, place among the batch's events of the job, time,
-- kind, data; $26 their count) are numbered after the job's last number
-- before the batch: $19 when the batch read it, else the row's last_seq
-- (migration 0021), else read from the events; the row's last_seq moves
-- on by the job's events in the batch ($20), in the same write.
WITH w AS (
    UPDATE relay_jobs AS j
    SET state = u.state, attempts = u.attempts, ready_at = u.ready_at, finished_at = u.finished_at,
        lease_token = u.lease_token, lease_expires_at = u.lease_expires_at, leased_by = u.leased_by,
        last_error = u.last_error, result = COALESCE(u.result, j.result), waiting_on = u.waiting_on,
        last_seq = CASE WHEN u.events = 0 THEN j.last_seq
                   ELSE COALESCE(u.seq_base, j.last_seq,
                                 (SELECT MAX(seq) FROM relay_job_events AS x WHERE x.job_id = j.id), 0) + u.events END
    FROM unnest($1::BIGINT[], $2::TEXT[], $3::BIGINT[], $4::TEXT[], $5::BIGINT[], $6::BIGINT[], $7::BIGINT[],
                $8::BIGINT[], $9::BIGINT[], $10::TEXT[], $11::TEXT[], $12::BYTEA[], $13::BIGINT[],
                $15::BIGINT[], $16::BIGINT[], $17::BIGINT[], $19::BIGINT[], $20::BIGINT[])
        AS u(id, expect_state, expect_token, state, attempts, ready_at, finished_at, lease_token, lease_expires_at,
             leased_by, last_error, result, waiting_on, succeeded, failed, dead, seq_base, events)
    WHERE j.id = u.id AND j.state = u.expect_state AND j.lease_token = u.expect_token
    RETURNING j.id, j.queue, u.succeeded, u.failed, u.dead, j.last_seq - u.events AS seq_base
), t AS (
    INSERT INTO relay_throughput (minute, queue, shard, succeeded, failed, dead)
    SELECT $18::BIGINT, queue, pg_backend_pid(), SUM(succeeded), SUM(failed), SUM(dead)
    FROM w WHERE succeeded + failed + dead > 0 GROUP BY queue ORDER BY queue
    ON CONFLICT (minute, queue, shard) DO UPDATE SET
        submitted = relay_throughput.submitted + excluded.submitted,
        succeeded = relay_throughput.succeeded + excluded.succeeded,
        failed = relay_throughput.failed + excluded.failed,
        dead = relay_throughput.dead + excluded.dead
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT e.job, w.seq_base + e.ord, e.at, e.kind, e.data
    FROM unnest($21::BIGINT[], $22::BIGINT[], $23::BIGINT[], $24::TEXT[], $25::TEXT[]) AS e(job, ord, at, kind, data)
    JOIN w ON w.id = e.job
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $14, 'updates') + relay_expect((SELECT COUNT(*) FROM e), $26, 'events') FROM w
