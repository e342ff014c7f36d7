-- Relay schema, version 18: the steps a job's handlers have recorded
-- (issue 40), in the order they were recorded, as
-- relay_store::decode::steps_bytes writes them (binary: a format byte, a
-- count, then each step's name, attempt, time and output). NULL: none.
-- Kept on the job's row, not in a table of their own: the lease that
-- reads the row carries them, with no second read on the claim's path,
-- and they go with the job (delete, retention) without more statements.
-- A job's steps are bounded (1,000 steps, 1 MiB of output). The
-- PostgreSQL store's 0024 does the same.
ALTER TABLE jobs ADD COLUMN steps BLOB;
