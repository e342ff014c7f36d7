-- Relay schema for PostgreSQL, version 9: the job counts' UPDATE trigger
-- without its join.
--
-- An UPDATE moves each row it changes out of its old (queue, state) and
-- into its new one, and ids never change: so each (queue, state)'s change
-- is the rows it has among the new rows less those among the old, with no
-- need to pair old and new rows by id. Version 8 paired them (two joins of
-- the transition tables); this sums them in one pass and writes only the
-- counts that moved. Measured with EXPLAIN ANALYZE on this machine: an
-- UPDATE of 32 rows from READY to LEASED spent 0.25-0.29 ms in the trigger,
-- now 0.14-0.20 ms; of 8 rows, 0.13-0.14 ms, now 0.08-0.11 ms.
CREATE OR REPLACE FUNCTION relay_count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
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
            SELECT queue, state, -1 AS d FROM relay_old
            UNION ALL
            SELECT queue, state, 1 FROM relay_new
        ) AS moved
        GROUP BY queue, state HAVING SUM(d) <> 0 ORDER BY queue, state
        ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$;
