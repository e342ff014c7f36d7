-- Durable execution (issue 40). Written to run again on a database that
-- has it (a test sets the version back to replay the upgrades). The steps a job's handlers have recorded (issue 40), as
-- relay_store::decode::steps_bytes writes them. NULL: none. On the job's
-- row, as the SQLite store's version 18 says why.
ALTER TABLE relay_jobs ADD COLUMN IF NOT EXISTS steps BYTEA;

-- A sleeping job: WAITING on no other job until its ready_at (the SQLite
-- store's version 18 says how these are read).
CREATE INDEX IF NOT EXISTS relay_jobs_sleeping ON relay_jobs (ready_at) WHERE state = 'WAITING' AND waiting_on = 0;
CREATE INDEX IF NOT EXISTS relay_jobs_sleeping_queue ON relay_jobs (queue, ready_at) WHERE state = 'WAITING' AND waiting_on = 0;

-- A job waiting for an event (the SQLite store's version 18 says how it is
-- read). A row goes with its job.
CREATE TABLE IF NOT EXISTS relay_waits (
    job_id BIGINT NOT NULL PRIMARY KEY REFERENCES relay_jobs (id) ON DELETE CASCADE,
    key    TEXT   NOT NULL,
    step   TEXT   NOT NULL,
    until  BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS relay_waits_key ON relay_waits (key);
