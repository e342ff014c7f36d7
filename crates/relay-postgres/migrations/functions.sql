-- The functions of Relay's PostgreSQL schema, each in its current
-- definition and nowhere else. migrate() (src/connect.rs) runs this file
-- after the migrations it applies, in their transaction, whenever it
-- applies any: a new database and an upgraded one end with the same
-- functions. A database already at the newest version is not touched, so a
-- change here reaches existing databases only with a new migration (raise
-- SCHEMA_VERSION, even for a migration with nothing else in it). A change of
-- a function's arguments or result, which CREATE OR REPLACE cannot make,
-- needs that migration to DROP FUNCTION IF EXISTS the old signature (IF
-- EXISTS: a database upgraded from before it never had it), as 0006 does.
--
-- relay_submit: transactional enqueue from any language (since version 5;
-- the traceparent, lease length and timeout arguments since 6; counted in
-- the throughput history since 8; the group since 18). `relay_submit(...)` submits a job inside
-- the caller's own transaction: the job exists if and only if that
-- transaction commits, and the NOTIFY it sends (delivered at commit) wakes
-- waiting lessees of every Relay process. The checks are the library's
-- (NewJob::validate); a bad argument raises SQLSTATE 22023
-- (invalid_parameter_value) naming it, and aborts the caller's transaction
-- as any error does. A unique key held by an unfinished job returns that
-- job's id and writes nothing.
--
--   SELECT relay_submit('emails', 'send', convert_to('{"to":"ada"}', 'UTF8'));
--   SELECT relay_submit('emails', 'send', '{}', p_priority => 2, p_delay_ms => 60000, p_unique_key => 'order-7');
--   SELECT relay_submit('emails', 'send', '{}',
--                       p_traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
--   SELECT relay_submit('emails', 'send', '{}', p_group => 'tenant-42');
CREATE OR REPLACE FUNCTION relay_submit(
    p_queue        TEXT,
    p_kind         TEXT,
    p_payload      BYTEA  DEFAULT '',
    p_priority     INT    DEFAULT 1,
    p_delay_ms     BIGINT DEFAULT 0,
    p_max_attempts INT    DEFAULT 20,
    p_unique_key   TEXT   DEFAULT NULL,
    p_lease_for_ms BIGINT DEFAULT NULL,
    p_timeout_ms   BIGINT DEFAULT NULL,
    p_traceparent  TEXT   DEFAULT NULL,
    p_group        TEXT   DEFAULT NULL
) RETURNS BIGINT
LANGUAGE plpgsql AS $$
DECLARE
    now_ms   BIGINT := floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
    ready_ms BIGINT;
    new_id   BIGINT;
BEGIN
    IF p_queue IS NULL OR p_queue !~ '^[A-Za-z0-9_.-]{1,64}$' THEN
        RAISE EXCEPTION 'relay_submit: invalid queue %: 1-64 of A-Z a-z 0-9 _ . -', quote_nullable(p_queue)
            USING ERRCODE = '22023';
    END IF;
    IF p_kind IS NULL OR char_length(p_kind) NOT BETWEEN 1 AND 64 OR p_kind ~ '[[:cntrl:]]' THEN
        RAISE EXCEPTION 'relay_submit: invalid kind %: 1-64 characters, no control characters', quote_nullable(p_kind)
            USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL OR octet_length(p_payload) > 1048576 THEN
        RAISE EXCEPTION 'relay_submit: invalid payload: at most 1048576 bytes (give '''' for none)' USING ERRCODE = '22023';
    END IF;
    IF p_priority IS NULL OR p_priority NOT BETWEEN 0 AND 3 THEN
        RAISE EXCEPTION 'relay_submit: invalid priority %: use 0 (least urgent) to 3 (most urgent)', p_priority
            USING ERRCODE = '22023';
    END IF;
    IF p_delay_ms IS NULL OR p_delay_ms < 0 THEN
        RAISE EXCEPTION 'relay_submit: invalid delay_ms %: 0 or more', p_delay_ms USING ERRCODE = '22023';
    END IF;
    IF p_max_attempts IS NULL OR p_max_attempts NOT BETWEEN 1 AND 1000 THEN
        RAISE EXCEPTION 'relay_submit: invalid max_attempts %: 1-1000', p_max_attempts USING ERRCODE = '22023';
    END IF;
    IF p_lease_for_ms IS NOT NULL AND p_lease_for_ms NOT BETWEEN 1 AND 86400000 THEN
        RAISE EXCEPTION 'relay_submit: invalid lease_for_ms %: 1 ms to 24 h', p_lease_for_ms USING ERRCODE = '22023';
    END IF;
    IF p_timeout_ms IS NOT NULL AND p_timeout_ms NOT BETWEEN 1 AND 86400000 THEN
        RAISE EXCEPTION 'relay_submit: invalid timeout_ms %: 1 ms to 24 h', p_timeout_ms USING ERRCODE = '22023';
    END IF;
    IF p_traceparent IS NOT NULL AND (p_traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
            OR substr(p_traceparent, 4, 32) = repeat('0', 32) OR substr(p_traceparent, 37, 16) = repeat('0', 16)) THEN
        RAISE EXCEPTION 'relay_submit: invalid traceparent %: expected 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase',
            quote_nullable(p_traceparent) USING ERRCODE = '22023';
    END IF;
    IF p_group IS NOT NULL AND char_length(p_group) NOT BETWEEN 1 AND 256 THEN
        RAISE EXCEPTION 'relay_submit: invalid group: 1-256 characters' USING ERRCODE = '22023';
    END IF;
    IF p_unique_key IS NOT NULL THEN
        IF char_length(p_unique_key) NOT BETWEEN 1 AND 256 THEN
            RAISE EXCEPTION 'relay_submit: invalid unique_key: 1-256 characters' USING ERRCODE = '22023';
        END IF;
        SELECT id INTO new_id FROM relay_jobs
        WHERE unique_key = p_unique_key AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING');
        IF FOUND THEN
            RETURN new_id;
        END IF;
    END IF;
    ready_ms := now_ms + p_delay_ms;
    INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            unique_key, lease_token, lease_for_ms, timeout_ms, traceparent, grp, last_seq)
    VALUES (p_queue, p_kind, p_payload, p_priority, CASE WHEN p_delay_ms > 0 THEN 'SCHEDULED' ELSE 'READY' END,
            0, p_max_attempts, ready_ms, now_ms, p_unique_key, 0,
            p_lease_for_ms, p_timeout_ms, p_traceparent, p_group, 1)
    RETURNING id INTO new_id;
    -- The "submitted" event, as the engine writes it (keys in sorted order):
    -- the job's first, so its last_seq (migration 0021) is 1.
    INSERT INTO relay_job_events (job_id, seq, at, kind, data)
    VALUES (new_id, 1, now_ms, 'submitted', json_build_object(
        'kind', p_kind, 'priority', p_priority, 'queue', p_queue,
        'ready_at', to_char(to_timestamp(ready_ms / 1000.0) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
        'via', 'relay_submit')::TEXT);
    -- Counted in the throughput history, in this backend's own shard: no
    -- other transaction waits on the row this one holds until it commits.
    INSERT INTO relay_throughput (minute, queue, shard, submitted)
    VALUES (now_ms / 60000 * 60000, p_queue, pg_backend_pid(), 1)
    ON CONFLICT (minute, queue, shard) DO UPDATE SET submitted = relay_throughput.submitted + 1;
    IF p_delay_ms = 0 THEN
        PERFORM pg_notify('relay_ready', '');
    END IF;
    RETURN new_id;
END
$$;
