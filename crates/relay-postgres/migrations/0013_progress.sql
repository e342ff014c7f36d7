-- What a job's handler last reported of its run (the JSON of
-- relay_core::Progress: fraction, message, at, attempt).
ALTER TABLE relay_jobs ADD COLUMN progress TEXT;
