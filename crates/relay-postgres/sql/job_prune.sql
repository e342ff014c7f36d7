-- Finished jobs older than $1 among the 5000 oldest ids (a bounded read even
-- when nothing is old enough), at most 1000 a call, with their events and
-- the dependency edges from them.
-- Keeps the hot table small; autovacuum reclaims the space.
WITH gone AS (
    DELETE FROM relay_jobs WHERE id IN (
        SELECT id FROM (SELECT id, state, finished_at FROM relay_jobs ORDER BY id LIMIT 5000) AS oldest
        WHERE state IN ('SUCCEEDED', 'DEAD', 'CANCELLED') AND finished_at < $1
        LIMIT 1000)
    RETURNING id
), events AS (
    DELETE FROM relay_job_events WHERE job_id IN (SELECT id FROM gone)
), deps AS (
    DELETE FROM relay_job_deps WHERE parent IN (SELECT id FROM gone)
)
SELECT COUNT(*) FROM gone
