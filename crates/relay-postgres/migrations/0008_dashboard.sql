-- Relay schema for PostgreSQL, version 8: what the dashboard reads without
-- scanning relay_jobs.

-- No job is written while the counts below are first taken and their
-- triggers made (a write between the two would be missed for good): other
-- processes' writers wait for this migration's commit.
LOCK TABLE relay_jobs IN SHARE ROW EXCLUSIVE MODE;
--
-- Several writers (two per process, every process on the database, and
-- every application transaction that calls relay_submit) add to the same
-- counters, and a row's lock is held until its transaction commits. So
-- each server backend adds to rows of its own (a shard), and a read sums
-- the shards: writers never take turns on a counter.

-- Throughput history: per queue and minute, jobs submitted, acknowledged,
-- attempts failed and jobs dead, added to by every batch in the statement
-- that writes the jobs (apply_insert.sql, apply_update.sql,
-- apply_submit.sql, and relay_submit below), in the shard of its backend
-- (its pid: one row per queue, minute and backend that wrote in it).
CREATE TABLE relay_throughput (
    minute    BIGINT   NOT NULL,  -- Unix milliseconds of the minute's start
    queue     TEXT     NOT NULL,
    shard     INT      NOT NULL,
    submitted BIGINT   NOT NULL DEFAULT 0,
    succeeded BIGINT   NOT NULL DEFAULT 0,
    failed    BIGINT   NOT NULL DEFAULT 0,
    dead      BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, shard)
);

-- Jobs per queue and state (what `stats` answers: a GROUP BY over a million
-- jobs takes most of a second). Kept by statement-level triggers, so every
-- statement that writes relay_jobs counts (the engine's, relay_submit's, an
-- operator's own SQL), once per statement, in the shard of its backend
-- (its pid); the housekeeping folds the shards of backends that have ended
-- into shard 0. (Counting in a CTE of each statement instead was measured
-- too, in psql, 2,000 autocommit UPDATEs of 50 rows: the trigger added
-- 0.1-0.2 ms to each, the CTE 0.25-0.3 ms.)
CREATE TABLE relay_job_counts (
    queue TEXT   NOT NULL,
    state TEXT   NOT NULL,
    shard INT    NOT NULL,
    n     BIGINT NOT NULL,
    PRIMARY KEY (queue, state, shard)
);
INSERT INTO relay_job_counts (queue, state, shard, n)
SELECT queue, state, 0, COUNT(*) FROM relay_jobs GROUP BY queue, state;

CREATE FUNCTION relay_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO relay_job_counts (queue, state, shard, n)
        SELECT queue, state, pg_backend_pid(), COUNT(*) FROM relay_new GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO relay_job_counts (queue, state, shard, n)
        SELECT queue, state, pg_backend_pid(), -COUNT(*) FROM relay_old GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n;
    ELSE
        INSERT INTO relay_job_counts (queue, state, shard, n)
        SELECT queue, state, pg_backend_pid(), SUM(d) FROM (
            SELECT o.queue, o.state, -1 AS d FROM relay_old o JOIN relay_new n ON n.id = o.id
            WHERE (n.queue, n.state) IS DISTINCT FROM (o.queue, o.state)
            UNION ALL
            SELECT n.queue, n.state, 1 FROM relay_old o JOIN relay_new n ON n.id = o.id
            WHERE (n.queue, n.state) IS DISTINCT FROM (o.queue, o.state)
        ) AS moved
        GROUP BY queue, state ORDER BY queue, state
        ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER relay_jobs_count_insert AFTER INSERT ON relay_jobs
    REFERENCING NEW TABLE AS relay_new FOR EACH STATEMENT EXECUTE FUNCTION relay_count_jobs();
CREATE TRIGGER relay_jobs_count_update AFTER UPDATE ON relay_jobs
    REFERENCING OLD TABLE AS relay_old NEW TABLE AS relay_new FOR EACH STATEMENT EXECUTE FUNCTION relay_count_jobs();
CREATE TRIGGER relay_jobs_count_delete AFTER DELETE ON relay_jobs
    REFERENCING OLD TABLE AS relay_old FOR EACH STATEMENT EXECUTE FUNCTION relay_count_jobs();

-- TRUNCATE relay_jobs leaves no job to count.
CREATE FUNCTION relay_count_truncate() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM relay_job_counts;
    RETURN NULL;
END
$$;
CREATE TRIGGER relay_jobs_count_truncate AFTER TRUNCATE ON relay_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION relay_count_truncate();

-- relay_submit (migration 0006) as before, and counted in the throughput
-- history too.
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
    p_traceparent  TEXT   DEFAULT NULL
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
    IF p_unique_key IS NOT NULL THEN
        IF char_length(p_unique_key) NOT BETWEEN 1 AND 256 THEN
            RAISE EXCEPTION 'relay_submit: invalid unique_key: 1-256 characters' USING ERRCODE = '22023';
        END IF;
        SELECT id INTO new_id FROM relay_jobs
        WHERE unique_key = p_unique_key AND state IN ('READY', 'LEASED', 'WAITING');
        IF FOUND THEN
            RETURN new_id;
        END IF;
    END IF;
    ready_ms := now_ms + p_delay_ms;
    INSERT INTO relay_jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                            unique_key, lease_token, lease_for_ms, timeout_ms, traceparent)
    VALUES (p_queue, p_kind, p_payload, p_priority, 'READY', 0, p_max_attempts, ready_ms, now_ms, p_unique_key, 0,
            p_lease_for_ms, p_timeout_ms, p_traceparent)
    RETURNING id INTO new_id;
    -- The "submitted" event, as the engine writes it (keys in sorted order).
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

-- Failed jobs newest first, whatever their queue (the jobs page's DEAD
-- search, the dead groups' window): (state, id, queue) replaces migration
-- 0007's (queue, state, id).
DROP INDEX relay_jobs_failed;
CREATE INDEX relay_jobs_failed ON relay_jobs (state, id, queue) WHERE state IN ('DEAD', 'CANCELLED');
