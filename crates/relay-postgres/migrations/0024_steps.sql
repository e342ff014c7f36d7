-- The steps a job's handlers have recorded (issue 40), as
-- relay_store::decode::steps_bytes writes them. NULL: none. On the job's
-- row, as the SQLite store's version 18 says why.
ALTER TABLE relay_jobs ADD COLUMN steps BYTEA;
