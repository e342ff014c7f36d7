-- Relay schema, version 8: throughput history (the dashboard's chart).
-- Per queue and minute: jobs submitted, acknowledged, attempts failed and
-- jobs dead, added to by every batch in the statement that writes the jobs
-- (apply_insert.sql, apply_update.sql, apply_submit.sql).
--
-- Several writers (two per process, and every process on the database) add
-- to the same minute of the same queue; a row's lock is held until the
-- batch commits. So each server backend writes a shard of its own
-- (pg_backend_pid() % 8), and a read sums the shards: writers do not take
-- turns on one row.
CREATE TABLE relay_throughput (
    minute    BIGINT   NOT NULL,  -- Unix milliseconds of the minute's start
    queue     TEXT     NOT NULL,
    shard     SMALLINT NOT NULL,
    submitted BIGINT   NOT NULL DEFAULT 0,
    succeeded BIGINT   NOT NULL DEFAULT 0,
    failed    BIGINT   NOT NULL DEFAULT 0,
    dead      BIGINT   NOT NULL DEFAULT 0,
    PRIMARY KEY (minute, queue, shard)
);
