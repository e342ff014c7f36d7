-- A batch's events of jobs it does not update (those it updates go with
-- their updates, apply_update.sql), in one statement: a new job's events
-- (the job's insert set its last_seq, migration 0021), and events added
-- to a job the batch otherwise leaves as it is (a user's event; that job's
-- last_seq is forgotten by apply_forget.sql). Each is numbered after the
-- job's last event before the batch ($2 when the batch knows it, else read
-- here) plus its place among the batch's events of that job ($3).
-- The count is checked in the statement (relay_expect, migration 0002): a
-- shortfall aborts the transaction before the COMMIT sent after it.
WITH w AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT e.job, COALESCE(e.base, (SELECT MAX(seq) FROM relay_job_events WHERE job_id = e.job), 0) + e.ord,
           e.at, e.kind, e.data
    FROM unnest($1::BIGINT[], $2::BIGINT[], $3::BIGINT[], $4::BIGINT[], $5::TEXT[], $6::TEXT[])
        AS e(job, base, ord, at, kind, data)
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $7, 'events') FROM w
