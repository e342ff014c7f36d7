-- A batch's deletions: the jobs, their events and the dependency edges from
-- them, in one statement. The count
-- is checked in the statement (relay_expect, migration 0002): a shortfall
-- aborts the transaction before the COMMIT sent after it.
WITH e AS (DELETE FROM relay_job_events WHERE job_id = ANY($1::BIGINT[])),
d AS (DELETE FROM relay_job_deps WHERE parent = ANY($1::BIGINT[])),
w AS (DELETE FROM relay_jobs WHERE id = ANY($1::BIGINT[]) RETURNING 1)
SELECT relay_expect(COUNT(*), $2, 'deletions') FROM w
