-- Relay schema, version 18: durable execution (issue 40). The steps a job's handlers have recorded
-- (issue 40), in the order they were recorded, as
-- relay_store::decode::steps_bytes writes them (binary: a format byte, a
-- count, then each step's name, attempt, time and output). NULL: none.
-- Kept on the job's row, not in a table of their own: the lease that
-- reads the row carries them, with no second read on the claim's path,
-- and they go with the job (delete, retention) without more statements.
-- A job's steps are bounded (1,000 steps, 1 MiB of output). The
-- PostgreSQL store's 0024 does the same.
ALTER TABLE jobs ADD COLUMN steps BLOB;

-- A job put to sleep by its handler is WAITING on no other job
-- (`waiting_on` 0) until its `ready_at`, holding no lease; the writers make
-- it READY then, as they promote a SCHEDULED job. The reap reads the due
-- ones in order of their time, whatever their queue (jobs_sleeping), and a
-- lease waiting on a queue wakes at its first sleeper's time
-- (jobs_sleeping_queue). Jobs waiting on others (`waiting_on` > 0) are in
-- neither: time never wakes them.
CREATE INDEX jobs_sleeping ON jobs (ready_at) WHERE state = 'WAITING' AND waiting_on = 0;
CREATE INDEX jobs_sleeping_queue ON jobs (queue, ready_at) WHERE state = 'WAITING' AND waiting_on = 0;

-- A job waiting for an event (issue 40): the event's key, the step its
-- wait records, and when it gives up. The job itself is WAITING on no
-- other job until then (as a sleeper); an emit of the key reads its
-- waiters here (waits_key), records the event in each one's steps and
-- makes it READY in its own commit. The emitted events are marks
-- (`event:<key>`, kept 7 days). A row goes with its job.
CREATE TABLE waits (
    job_id INTEGER NOT NULL PRIMARY KEY,
    key    TEXT    NOT NULL,
    step   TEXT    NOT NULL,
    until  INTEGER NOT NULL  -- Unix milliseconds
);
CREATE INDEX waits_key ON waits (key);
CREATE TRIGGER jobs_waits_delete AFTER DELETE ON jobs
BEGIN
    DELETE FROM waits WHERE job_id = old.id;
END;
