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

-- relay_emit: an event emitted inside the caller's own transaction (since
-- version 25), as Relay::emit emits it: the event is kept 7 days (its mark
-- `event:<key>`, whose first emit wins), and every job waiting for the key
-- has the payload recorded as its wait's step and is READY, all in the
-- caller's transaction: the order marked shipped and its event, or
-- neither. The NOTIFY it sends when it woke a job (delivered at commit)
-- wakes the waiting lessees of every Relay process. The checks are the
-- library's (Waited::check_key, check_payload); a bad argument raises
-- SQLSTATE 22023 naming it. It takes the key's transaction lock
-- (sql/event_lock.sql) first, as the Relay writers do for an emit and a
-- wait of the key: a wait that begins while the caller's transaction is
-- open waits for its commit (keep it short). Returns whether this was the
-- key's first emit and how many jobs it woke.
--
--   SELECT * FROM relay_emit('shipped:42', convert_to('{"carrier":"ups"}', 'UTF8'));
CREATE OR REPLACE FUNCTION relay_emit(p_key TEXT, p_payload BYTEA DEFAULT '')
RETURNS TABLE (first BOOLEAN, woken INT)
LANGUAGE plpgsql AS $$
DECLARE
    now_ms  BIGINT := floor(extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
    txt     TEXT;
    b64     TEXT;
    mark    TEXT;
    output  BYTEA;
    w       RECORD;
    j       RECORD;
    grown   BYTEA;
    seq     BIGINT;
    n       INT := 0;
BEGIN
    IF p_key IS NULL OR char_length(p_key) NOT BETWEEN 1 AND 256 OR p_key !~ '^[A-Za-z0-9_.:/@+=-]+$' THEN
        RAISE EXCEPTION 'relay_emit: invalid key %: 1-256 of ASCII letters, digits and _ . - : / @ + =', quote_nullable(p_key)
            USING ERRCODE = '22023';
    END IF;
    IF p_key LIKE 'token:%' THEN
        RAISE EXCEPTION 'relay_emit: invalid key %: keys under token: are the completion tokens'' own (complete a token with its secret: POST /v1/tokens/{token}/complete)',
            quote_literal(p_key) USING ERRCODE = '22023';
    END IF;
    IF p_payload IS NULL OR octet_length(p_payload) > 65536 THEN
        RAISE EXCEPTION 'relay_emit: invalid payload: at most 65536 bytes (give '''' for none; emit an id, keep the data in your own storage)'
            USING ERRCODE = '22023';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtextextended(p_key, 40));
    -- The payload as its mark keeps it and as a wait's step records it
    -- (plan::event_text and Waited::Event's output in the library): JSON
    -- as it is, anything else in base64.
    BEGIN
        txt := convert_from(p_payload, 'UTF8');
        PERFORM txt::JSON;
    EXCEPTION WHEN OTHERS THEN
        txt := NULL;
    END;
    b64 := replace(encode(p_payload, 'base64'), E'\n', '');
    IF txt IS NOT NULL THEN
        mark := 'j' || txt;
        output := convert_to('{"event":' || btrim(txt, E' \t\n\r') || '}', 'UTF8');
    ELSE
        mark := 'b' || b64;
        output := CASE WHEN octet_length(p_payload) = 0 THEN convert_to('{"event":null}', 'UTF8')
                       ELSE convert_to('{"event_base64":"' || b64 || '"}', 'UTF8') END;
    END IF;
    -- The first emit of a key wins while its mark lives.
    INSERT INTO relay_marks (key, value, expires_at) VALUES ('event:' || p_key, mark, now_ms + 7 * 86400000)
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
        WHERE relay_marks.expires_at <= now_ms;
    IF NOT FOUND THEN
        RETURN QUERY SELECT false, 0;
        RETURN;
    END IF;
    -- Every wait for the key ends; each job still WAITING for it (not
    -- cancelled, deleted or retried since) records the event and is READY.
    -- Rows are locked in id order, as the writers lock them.
    FOR w IN WITH d AS (DELETE FROM relay_waits WHERE key = p_key RETURNING job_id, step)
             SELECT job_id, step FROM d ORDER BY job_id LOOP
        SELECT id, state, waiting_on, attempts, steps, last_seq INTO j FROM relay_jobs WHERE id = w.job_id FOR UPDATE;
        IF NOT FOUND OR j.state <> 'WAITING' OR j.waiting_on <> 0 THEN
            CONTINUE;
        END IF;
        -- Recorded already or past the job's bounds: woken all the same.
        grown := relay_steps_append(j.id, j.steps, w.step, j.attempts, now_ms, output);
        seq := COALESCE(j.last_seq, (SELECT MAX(e.seq) FROM relay_job_events AS e WHERE e.job_id = j.id), 0) + 1;
        UPDATE relay_jobs SET state = 'READY', ready_at = now_ms, steps = COALESCE(grown, j.steps), last_seq = seq
        WHERE id = j.id;
        INSERT INTO relay_job_events (job_id, seq, at, kind, data)
        VALUES (j.id, seq, now_ms, 'woken', jsonb_build_object('key', p_key)::TEXT);
        n := n + 1;
    END LOOP;
    IF n > 0 THEN
        PERFORM pg_notify('relay_ready', '');
    END IF;
    RETURN QUERY SELECT true, n;
END
$$;

-- relay_steps_append: job `job`'s steps column with one more step, as
-- relay_store::decode::steps_bytes writes it (a format byte 1, the count,
-- then each step's name, attempt, time and output, integers
-- little-endian); NULL when a step of that name is recorded already or one
-- more would pass the job's bounds (1,000 steps, 1 MiB of output). Steps
-- that do not decode raise SQLSTATE XX001 (data_corrupted) naming the job.
CREATE OR REPLACE FUNCTION relay_steps_append(job BIGINT, steps BYTEA, name TEXT, attempt BIGINT, at_ms BIGINT, output BYTEA)
RETURNS BYTEA
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    nm    BYTEA  := convert_to(name, 'UTF8');
    n     BIGINT := 0;
    pos   INT    := 5;  -- 0-based, after the format byte and the count
    len   BIGINT;
    total BIGINT := octet_length(output);
BEGIN
    IF steps IS NOT NULL THEN
        IF octet_length(steps) < 5 OR get_byte(steps, 0) <> 1 THEN
            RAISE EXCEPTION 'relay_emit: job %''s steps do not decode (format byte): delete it (relay delete)', job
                USING ERRCODE = 'XX001';
        END IF;
        -- (Every shift in parentheses: | and << are of one precedence, left to right.)
        n := get_byte(steps, 1) | (get_byte(steps, 2) << 8) | (get_byte(steps, 3) << 16) | (get_byte(steps, 4)::BIGINT << 24);
        FOR i IN 1..n LOOP
            IF pos + 2 > octet_length(steps) THEN
                RAISE EXCEPTION 'relay_emit: job %''s steps end inside a step', job USING ERRCODE = 'XX001';
            END IF;
            len := get_byte(steps, pos) | (get_byte(steps, pos + 1) << 8);
            IF substring(steps FROM pos + 3 FOR len::INT) = nm THEN
                RETURN NULL;
            END IF;
            pos := pos + 2 + len::INT + 12;
            IF pos + 4 > octet_length(steps) THEN
                RAISE EXCEPTION 'relay_emit: job %''s steps end inside a step', job USING ERRCODE = 'XX001';
            END IF;
            len := get_byte(steps, pos) | (get_byte(steps, pos + 1) << 8) | (get_byte(steps, pos + 2) << 16)
                   | (get_byte(steps, pos + 3)::BIGINT << 24);
            total := total + len;
            pos := pos + 4 + len::INT;
        END LOOP;
        IF pos <> octet_length(steps) THEN
            RAISE EXCEPTION 'relay_emit: job %''s steps do not decode (bytes left over)', job USING ERRCODE = 'XX001';
        END IF;
    END IF;
    IF n + 1 > 1000 OR total > 1048576 THEN
        RETURN NULL;
    END IF;
    RETURN '\x01'::BYTEA || relay_le(n + 1, 4) || COALESCE(substring(steps FROM 6), '\x'::BYTEA)
        || relay_le(octet_length(nm), 2) || nm || relay_le(attempt, 4) || relay_le(at_ms, 8)
        || relay_le(octet_length(output), 4) || output;
END
$$;

-- relay_le: `x` as `n` bytes, little-endian (the steps column's integers).
CREATE OR REPLACE FUNCTION relay_le(x BIGINT, n INT) RETURNS BYTEA
LANGUAGE sql IMMUTABLE AS $$
    SELECT decode(string_agg(lpad(to_hex((x >> (8 * i)) & 255), 2, '0'), '' ORDER BY i), 'hex')
    FROM generate_series(0, n - 1) AS i
$$;
