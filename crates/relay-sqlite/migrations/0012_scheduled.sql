-- Relay schema, version 12: jobs waiting for their time are SCHEDULED (a
-- first run, a snooze or a debounce in the future) or RETRYING (backing off
-- after a failed attempt), no longer READY; the writers promote them to
-- READY when `ready_at` comes, and a claim takes a due one as it is.

-- The three states waiting to be leased are written `state BETWEEN 'READY'
-- AND 'SCHEDULED'` (READY < RETRYING < SCHEDULED, and no other state sorts
-- between them: sql.rs tests it), and the two waiting for their time
-- `BETWEEN 'RETRYING' AND 'SCHEDULED'`: with an IN list SQLite builds a
-- table of its values each time a statement runs, and the claim's four
-- probes made lease+ACK 0.80x (BENCHMARKS.md).

-- The claim's index holds every job waiting to be leased, so the claim's
-- probes (`ready_at <= now`) find a due SCHEDULED or RETRYING job that is
-- not promoted yet, and its plans stay as they were. `state` is in the
-- index so that the probes still read nothing else: with `state = 'READY'`
-- the predicate told SQLite the column's value, with a range it does not,
-- and each candidate would be read from the table (tests/plan.rs).
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, priority, ready_at, id, state)
    WHERE state BETWEEN 'READY' AND 'SCHEDULED';

-- The promotion: the due ones in order of their time, whatever their queue.
CREATE INDEX jobs_due ON jobs (ready_at) WHERE state BETWEEN 'RETRYING' AND 'SCHEDULED';

-- Both still hold their unique key.
DROP INDEX jobs_active_key;
CREATE UNIQUE INDEX jobs_active_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING');

-- READY jobs whose time has not come: RETRYING when an attempt failed,
-- SCHEDULED otherwise. Their counts move with them (the migration holds
-- the write lock: no writer can come between).
UPDATE jobs SET state = CASE WHEN last_error IS NOT NULL THEN 'RETRYING' ELSE 'SCHEDULED' END
WHERE state = 'READY' AND ready_at > CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER);
-- One pass over the moved rows (jobs_due) counts them; each queue's READY
-- count then gives up what its two new rows hold (a primary-key lookup).
INSERT INTO job_counts (queue, state, n)
SELECT queue, state, COUNT(*) FROM jobs WHERE state BETWEEN 'RETRYING' AND 'SCHEDULED' GROUP BY queue, state;
UPDATE job_counts SET n = n - (SELECT SUM(m.n) FROM job_counts AS m
                               WHERE m.queue = job_counts.queue AND m.state BETWEEN 'RETRYING' AND 'SCHEDULED')
WHERE state = 'READY'
  AND EXISTS (SELECT 1 FROM job_counts AS m WHERE m.queue = job_counts.queue AND m.state BETWEEN 'RETRYING' AND 'SCHEDULED');
