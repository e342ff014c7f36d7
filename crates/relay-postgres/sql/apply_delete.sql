-- A batch's deletions: the jobs and their events, in one statement.
WITH e AS (DELETE FROM relay_job_events WHERE job_id = ANY($1::BIGINT[]))
DELETE FROM relay_jobs WHERE id = ANY($1::BIGINT[])
