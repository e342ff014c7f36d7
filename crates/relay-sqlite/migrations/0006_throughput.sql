-- Relay schema, version 6: throughput history (the dashboard's chart).
-- One row per queue and minute, added to by each batch that submits, acks
-- or fails a job of the queue (one statement per queue per batch); rows
-- older than two days are pruned.
CREATE TABLE throughput (
    minute    INTEGER NOT NULL,  -- Unix milliseconds of the minute's start
    queue     TEXT    NOT NULL,
    submitted INTEGER NOT NULL DEFAULT 0,
    succeeded INTEGER NOT NULL DEFAULT 0,
    failed    INTEGER NOT NULL DEFAULT 0,
    dead      INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue)
) WITHOUT ROWID;
