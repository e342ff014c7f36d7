-- Relay schema, version 6: what the dashboard reads without scanning the
-- jobs table, kept by the writer in the batch's own transaction.

-- Throughput history: one row per queue and minute, added to by each batch
-- that submits, acks or fails a job of the queue (one statement per queue
-- per batch); rows older than two days are pruned.
CREATE TABLE throughput (
    minute    INTEGER NOT NULL,  -- Unix milliseconds of the minute's start
    queue     TEXT    NOT NULL,
    submitted INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    dead      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
) WITHOUT ROWID;

-- Jobs per queue and state: what `stats` answers (a GROUP BY over a million
-- jobs took a second). Each batch adds its changes, one statement per queue
-- and state it touched; so does the prune. Counted once here from the jobs
-- already in the file (the migration holds the write lock: no writer can
-- come between). Every process must run this version once it has migrated.
CREATE TABLE job_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;
INSERT INTO job_counts (queue, state, n)
SELECT queue, state, COUNT(*) FROM jobs
WHERE state IN ('WAITING', 'READY', 'LEASED', 'SUCCEEDED', 'DEAD', 'CANCELLED')  -- as the writers count
GROUP BY queue, state;

-- Failed jobs newest first, whatever their queue (the jobs page's DEAD
-- search, the dead groups' window): (state, id, queue) replaces migration
-- 0005's (queue, state, id), whose search by state alone sorted every
-- failed job. The queue, in the index, filters without reading the row.
DROP INDEX jobs_failed;
CREATE INDEX jobs_failed ON jobs (state, id, queue) WHERE state IN ('DEAD', 'CANCELLED');
