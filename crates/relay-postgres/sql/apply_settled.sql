-- The edges from jobs whose dependents this batch has told that they
-- finished: spent (a job retried and finished again must not count twice).
DELETE FROM relay_job_deps WHERE parent = ANY($1::BIGINT[])
