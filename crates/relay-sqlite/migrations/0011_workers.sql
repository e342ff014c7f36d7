-- Relay schema, version 11: workers, as their heartbeats describe them.
-- `beat` is the heartbeat's JSON (relay_core::WorkerBeat: name, host, pid,
-- queues, concurrency, version, started_at, beat_every, running jobs);
-- `seen_at` when it was recorded; `stopped_at` when the worker said it
-- stopped. Rows not seen for an hour are deleted by the prune.
CREATE TABLE workers (
    id         TEXT    PRIMARY KEY,
    beat       TEXT    NOT NULL,
    seen_at    INTEGER NOT NULL,
    stopped_at INTEGER
) WITHOUT ROWID;
