-- Relay schema for PostgreSQL, version 4: job dependencies. A job may wait
-- for other jobs (state WAITING): it becomes READY when the last of them
-- succeeds.

-- How many of the jobs this one depends on have not finished yet; above 0
-- exactly while WAITING.
ALTER TABLE relay_jobs ADD COLUMN waiting_on BIGINT NOT NULL DEFAULT 0;

-- The dependency graph, read from the parent: a job that finishes finds the
-- jobs waiting for it through the primary key, at a cost of its own
-- dependents, whatever the size of the graph. A child's edges are written
-- once, with the child, by a batch that holds its parents' rows locked; a
-- parent's are deleted once its dependents have been told it finished (or
-- when it is deleted or pruned).
CREATE TABLE relay_job_deps (
    parent     BIGINT NOT NULL,
    child      BIGINT NOT NULL,
    -- the child, if the parent ends DEAD or CANCELLED
    on_failure TEXT   NOT NULL CHECK (on_failure IN ('cancel', 'run')),
    PRIMARY KEY (parent, child)
);

-- A WAITING job is unfinished: it holds its unique key as READY and LEASED
-- jobs do.
DROP INDEX relay_jobs_active_key;
CREATE UNIQUE INDEX relay_jobs_active_key ON relay_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'LEASED', 'WAITING');
