-- A batch's new jobs, in one statement, each as the batch left it. A job
-- whose unique key another process took since the batch checked is not
-- inserted (ON CONFLICT DO NOTHING): the count then falls short, and the
-- batch is planned again (it then finds that process's job).
-- The count is checked in the statement (relay_expect, migration 0002): a
-- shortfall aborts the transaction before the COMMIT sent after it.
-- The jobs are counted in the throughput history's minute $24 (migration
-- 0008), in this backend's shard (its pid). $25: each job's group.
-- $26 each job's last event number in the batch (its last_seq, migration 0021).
WITH w AS (
    INSERT INTO relay_jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error,
                            lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, last_seq)
    SELECT id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent,
           -- tags come as one JSON array per job (an array of arrays would be
           -- flattened by unnest)
           CASE WHEN tags IS NULL THEN NULL ELSE ARRAY(SELECT json_array_elements_text(tags::json)) END, grp, last_seq
    FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::BYTEA[], $5::BIGINT[], $6::TEXT[], $7::BIGINT[],
                $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[], $12::TEXT[], $13::BYTEA[], $14::BIGINT[],
                $15::BIGINT[], $16::TEXT[], $17::TEXT[], $18::BIGINT[], $19::BIGINT[], $20::BIGINT[], $22::TEXT[], $23::TEXT[], $25::TEXT[], $26::BIGINT[])
         AS u(id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, last_seq)
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING') DO NOTHING
    RETURNING queue
), t AS (
    INSERT INTO relay_throughput (minute, queue, shard, submitted)
    SELECT $24::BIGINT, queue, pg_backend_pid(), COUNT(*) FROM w GROUP BY queue ORDER BY queue
    ON CONFLICT (minute, queue, shard) DO UPDATE SET
        submitted = relay_throughput.submitted + excluded.submitted,
        succeeded = relay_throughput.succeeded + excluded.succeeded,
        failed = relay_throughput.failed + excluded.failed,
        dead = relay_throughput.dead + excluded.dead
)
SELECT relay_expect(COUNT(*), $21, 'inserts') FROM w
