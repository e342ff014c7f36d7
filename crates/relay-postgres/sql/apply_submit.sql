-- A batch of new jobs and nothing else, when the batch read nothing: jobs,
-- their first events and the NOTIFY in ONE statement, run on its own
-- (autocommit: a statement is atomic by itself), so a lone submit costs one
-- round trip, as a hand-written INSERT would. Counts are checked as in the
-- apply_*.sql statements; a shortfall aborts the statement. Columns of $1-$20
-- as apply_insert.sql; the jobs are counted in the throughput history's
-- minute $31, as there; $32 their groups.
-- $33 each job's last event number (its last_seq, migration 0021).
WITH j AS (
    INSERT INTO relay_jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error,
                            lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, last_seq)
    SELECT id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent,
           -- tags come as one JSON array per job (an array of arrays would be
           -- flattened by unnest)
           CASE WHEN tags IS NULL THEN NULL ELSE ARRAY(SELECT json_array_elements_text(tags::json)) END, grp, last_seq
    FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::BYTEA[], $5::BIGINT[], $6::TEXT[], $7::BIGINT[],
                $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[], $12::TEXT[], $13::BYTEA[], $14::BIGINT[],
                $15::BIGINT[], $16::TEXT[], $17::TEXT[], $18::BIGINT[], $19::BIGINT[], $20::BIGINT[], $29::TEXT[], $30::TEXT[], $32::TEXT[], $33::BIGINT[])
         AS u(id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, last_seq)
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING') DO NOTHING
    RETURNING queue
), t AS (
    INSERT INTO relay_throughput (minute, queue, shard, submitted)
    SELECT $31::BIGINT, queue, pg_backend_pid(), COUNT(*) FROM j GROUP BY queue ORDER BY queue
    ON CONFLICT (minute, queue, shard) DO UPDATE SET
        submitted = relay_throughput.submitted + excluded.submitted,
        succeeded = relay_throughput.succeeded + excluded.succeeded,
        failed = relay_throughput.failed + excluded.failed,
        dead = relay_throughput.dead + excluded.dead
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    SELECT * FROM unnest($21::BIGINT[], $22::BIGINT[], $23::BIGINT[], $24::TEXT[], $25::TEXT[])
    RETURNING 1
), n AS (
    SELECT pg_notify('relay_ready', '') WHERE $28::BOOLEAN
)
SELECT relay_expect((SELECT COUNT(*) FROM j), $26, 'inserts')
     + relay_expect((SELECT COUNT(*) FROM e), $27, 'events')
     + (SELECT COUNT(*) FROM n)
