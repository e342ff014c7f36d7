-- A batch's deletions: the jobs, their events and the dependency edges from
-- them, in one statement, taken out of the job counts. The count
-- is checked in the statement (relay_expect, migration 0002): a shortfall
-- aborts the transaction before the COMMIT sent after it.
WITH e AS (DELETE FROM relay_job_events WHERE job_id = ANY($1::BIGINT[])),
d AS (DELETE FROM relay_job_deps WHERE parent = ANY($1::BIGINT[])),
w AS (DELETE FROM relay_jobs WHERE id = ANY($1::BIGINT[]) RETURNING queue, state),
c AS (
    INSERT INTO relay_job_counts (queue, state, shard, n)
    SELECT queue, state, pg_backend_pid(), -COUNT(*) FROM w GROUP BY queue, state ORDER BY queue, state
    ON CONFLICT (queue, state, shard) DO UPDATE SET n = relay_job_counts.n + excluded.n
)
SELECT relay_expect(COUNT(*), $2, 'deletions') FROM w
