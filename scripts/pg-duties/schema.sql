-- The textbook queue (tb.jobs) and the same with Relay's per-transition
-- duties (tb.djobs): scripts/pg-duties/run.
DROP SCHEMA IF EXISTS tb CASCADE; CREATE SCHEMA tb;
CREATE TABLE tb.jobs (id BIGSERIAL PRIMARY KEY, queue TEXT NOT NULL DEFAULT 'q', state TEXT NOT NULL, token BIGINT NOT NULL DEFAULT 0, payload BYTEA NOT NULL);
CREATE INDEX jobs_ready ON tb.jobs (id) WHERE state = 'READY';
-- the same with Relay's duties: an event per transition, counts per statement, throughput per ack
CREATE TABLE tb.djobs (id BIGSERIAL PRIMARY KEY, queue TEXT NOT NULL DEFAULT 'q', state TEXT NOT NULL, token BIGINT NOT NULL DEFAULT 0, payload BYTEA NOT NULL);
CREATE INDEX djobs_ready ON tb.djobs (id) WHERE state = 'READY';
CREATE TABLE tb.events (job_id BIGINT NOT NULL, seq BIGINT NOT NULL, at BIGINT NOT NULL, kind TEXT NOT NULL, data TEXT NOT NULL, PRIMARY KEY (job_id, seq));
CREATE TABLE tb.counts (queue TEXT NOT NULL, state TEXT NOT NULL, shard INT NOT NULL, n BIGINT NOT NULL, PRIMARY KEY (queue, state, shard));
CREATE TABLE tb.throughput (minute BIGINT NOT NULL, queue TEXT NOT NULL, shard INT NOT NULL, succeeded BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (minute, queue, shard));
CREATE FUNCTION tb.count_jobs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO tb.counts (queue, state, shard, n)
  SELECT queue, state, pg_backend_pid(), SUM(d) FROM (
    SELECT queue, state, -1 AS d FROM relay_old UNION ALL SELECT queue, state, 1 FROM relay_new) AS moved
  GROUP BY queue, state HAVING SUM(d) <> 0 ORDER BY queue, state
  ON CONFLICT (queue, state, shard) DO UPDATE SET n = tb.counts.n + excluded.n;
  RETURN NULL;
END $$;
CREATE TRIGGER djobs_count_update AFTER UPDATE ON tb.djobs
  REFERENCING OLD TABLE AS relay_old NEW TABLE AS relay_new FOR EACH STATEMENT EXECUTE FUNCTION tb.count_jobs();
INSERT INTO tb.jobs (state, payload) SELECT 'READY', '\x00' FROM generate_series(1, :jobs);
INSERT INTO tb.djobs (state, payload) SELECT 'READY', '\x00' FROM generate_series(1, :jobs);
INSERT INTO tb.events SELECT id, 1, 0, 'submitted', '' FROM tb.djobs;
VACUUM ANALYZE;
