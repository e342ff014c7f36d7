-- Housekeeping of the dashboard's counters: forgets minutes older than the
-- history keeps ($1), and folds the job counts of backends that have ended
-- into shard 0 (a live backend's rows are left alone: it may hold them).
-- Answers how many rows it deleted.
WITH old AS (
    DELETE FROM relay_throughput WHERE minute < $1 RETURNING 1
), ended AS (
    DELETE FROM relay_job_counts AS c
    WHERE shard <> 0 AND NOT EXISTS (SELECT 1 FROM pg_stat_activity AS a WHERE a.pid = c.shard)
    RETURNING queue, state, n
), folded AS (
    INSERT INTO relay_job_counts (queue, state, shard, n)
    SELECT queue, state, 0, SUM(n) FROM ended GROUP BY queue, state ORDER BY queue, state
    ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n
)
SELECT (SELECT COUNT(*) FROM old) + (SELECT COUNT(*) FROM ended)
