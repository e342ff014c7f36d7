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
-- apply_submit.sql, and relay_submit in functions.sql), in the shard of its backend
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

-- relay_submit as before, and counted in the throughput history too: its
-- definition is in functions.sql, which migrate() runs after this.

-- Failed jobs newest first, whatever their queue (the jobs page's DEAD
-- search, the dead groups' window): (state, id, queue) replaces migration
-- 0007's (queue, state, id).
DROP INDEX relay_jobs_failed;
CREATE INDEX relay_jobs_failed ON relay_jobs (state, id, queue) WHERE state IN ('DEAD', 'CANCELLED');
