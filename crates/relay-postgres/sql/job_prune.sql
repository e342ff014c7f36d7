-- Finished jobs older than $1 among the 5000 oldest ids (a bounded read even
-- when nothing is old enough), at most 1000 a call, with their events and
-- the dependency edges from them, taken out of the job counts.
-- Keeps the hot table small; autovacuum reclaims the space.
WITH gone AS (
    DELETE FROM relay_jobs WHERE id IN (
        SELECT id FROM (SELECT id, state, finished_at FROM relay_jobs ORDER BY id LIMIT 5000) AS oldest
        WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < $1
        LIMIT 1000)
    RETURNING id, queue, state
), counted AS (
    INSERT INTO relay_job_counts (queue, state, shard, n)
    SELECT queue, state, pg_backend_pid(), -COUNT(*) FROM gone GROUP BY queue, state ORDER BY queue, state
    ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n
), events AS (
    DELETE FROM relay_job_events WHERE job_id IN (SELECT id FROM gone)
), deps AS (
    DELETE FROM relay_job_deps WHERE parent IN (SELECT id FROM gone)
)
SELECT COUNT(*) FROM gone
