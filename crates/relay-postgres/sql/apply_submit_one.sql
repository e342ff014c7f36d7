-- apply_submit.sql for a batch of one job with its one event (a lone
-- submit, the common case): the same writes with scalar parameters instead
-- of one-element arrays through unnest, which measured 0.72-0.87x the time
-- in psql (docs/BENCHMARKS.md, "Where PostgreSQL stands after the counts").
-- $1-$20: the job's columns, in apply_insert.sql's order; $21-$24 its
-- event's seq, at, kind and data; $25 whether to NOTIFY; $26 traceparent;
-- $27 tags as a JSON array (NULL for none); $28 the throughput minute; $29
-- the job's group. Its last_seq (migration 0021) is its event's.
WITH j AS (
    INSERT INTO relay_jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error,
                            lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, last_seq)
    VALUES ($1::BIGINT, $2::TEXT, $3::TEXT, $4::BYTEA, $5::BIGINT, $6::TEXT, $7::BIGINT, $8::BIGINT, $9::BIGINT,
            $10::BIGINT, $11::BIGINT, $12::TEXT, $13::BYTEA, $14::BIGINT, $15::BIGINT, $16::TEXT, $17::TEXT,
            $18::BIGINT, $19::BIGINT, $20::BIGINT, $26::TEXT,
            CASE WHEN $27::TEXT IS NULL THEN NULL ELSE ARRAY(SELECT json_array_elements_text($27::TEXT::json)) END,
            $29::TEXT, $21::BIGINT)
    ON CONFLICT (unique_key) WHERE unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING') DO NOTHING
    RETURNING queue
), t AS (
    INSERT INTO relay_throughput (minute, queue, shard, submitted)
    SELECT $28::BIGINT, queue, pg_backend_pid(), 1 FROM j
    ON CONFLICT (minute, queue, shard) DO UPDATE SET submitted = relay_throughput.submitted + excluded.submitted
), e AS (
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    VALUES ($1::BIGINT, $21::BIGINT, $22::BIGINT, $23::TEXT, $24::TEXT)
    RETURNING 1
), n AS (
    SELECT pg_notify('relay_ready', '') WHERE $25::BOOLEAN
)
SELECT relay_expect((SELECT COUNT(*) FROM j), 1, 'inserts')
     + relay_expect((SELECT COUNT(*) FROM e), 1, 'events')
     + (SELECT COUNT(*) FROM n)
