-- Relay schema, version 16: jobs waiting for their time are SCHEDULED (a
-- first run, a snooze or a debounce in the future) or RETRYING (backing off
-- after a failed attempt), no longer READY; the writers promote them to
-- READY when `ready_at` comes, and a claim takes a due one as it is.

-- The claim's index holds every job waiting to be leased, so the claim's
-- probes (`ready_at <= now`) find a due SCHEDULED or RETRYING job that is
-- not promoted yet, and its plans stay as they were.
DROP INDEX relay_jobs_ready;
CREATE INDEX relay_jobs_ready ON relay_jobs (queue, priority, ready_at, id)
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING');

-- The promotion: the due ones in order of their time, whatever their queue.
CREATE INDEX relay_jobs_due ON relay_jobs (ready_at) WHERE state IN ('SCHEDULED', 'RETRYING');

-- Both still hold their unique key.
DROP INDEX relay_jobs_active_key;
CREATE UNIQUE INDEX relay_jobs_active_key ON relay_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING');

-- READY jobs whose time has not come: RETRYING when an attempt failed,
-- SCHEDULED otherwise (the counts' trigger moves their counts).
UPDATE relay_jobs SET state = CASE WHEN last_error IS NOT NULL THEN 'RETRYING' ELSE 'SCHEDULED' END
WHERE state = 'READY' AND ready_at > (extract(epoch FROM clock_timestamp()) * 1000)::BIGINT;
