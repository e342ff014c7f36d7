-- Relay schema, version 3: job dependencies. A job may wait for other jobs
-- (state WAITING): it becomes READY when the last of them succeeds.

-- How many of the jobs this one depends on have not finished yet; above 0
-- exactly while WAITING.
ALTER TABLE jobs ADD COLUMN waiting_on INTEGER NOT NULL DEFAULT 0;

-- The dependency graph, read from the parent: a job that finishes finds the
-- jobs waiting for it through the primary key, at a cost of its own
-- dependents, whatever the size of the graph. A child's edges are written
-- once, with the child; a parent's are deleted once its dependents have been
-- told it finished (or when it is deleted or pruned).
CREATE TABLE job_deps (
    parent     INTEGER NOT NULL,
    child      INTEGER NOT NULL,
    -- the child, if the parent ends DEAD or CANCELLED
    on_failure TEXT    NOT NULL CHECK (on_failure IN ('cancel', 'run')),
    PRIMARY KEY (parent, child)
) WITHOUT ROWID;

-- A WAITING job is unfinished: it holds its unique key as READY and LEASED
-- jobs do.
DROP INDEX jobs_active_key;
CREATE UNIQUE INDEX jobs_active_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'LEASED', 'WAITING');
