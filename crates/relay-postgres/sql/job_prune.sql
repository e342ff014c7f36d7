-- Finished jobs older than $1 among the $2 oldest ids (a bounded read even
-- when nothing is old enough), at most $3 a call (relay_store::PRUNE_SCAN,
-- PRUNE_BATCH), with their events and
-- the dependency edges from them.
-- Keeps the hot table small; autovacuum reclaims the space.
WITH gone AS (
    DELETE FROM relay_jobs WHERE id IN (
        SELECT id FROM (SELECT id, state, finished_at FROM relay_jobs ORDER BY id LIMIT $2) AS oldest
        WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < $1
        LIMIT $3)
    RETURNING id
), events AS (
    DELETE FROM relay_job_events WHERE job_id IN (SELECT id FROM gone)
), deps AS (
    DELETE FROM relay_job_deps WHERE parent IN (SELECT id FROM gone)
)
SELECT COUNT(*) FROM gone
