-- Workers, as their heartbeats describe them. `beat` is the heartbeat's
-- JSON (relay_core::WorkerBeat); `seen_at` when it was recorded;
-- `stopped_at` when the worker said it stopped. Rows not seen for an hour
-- are deleted by the prune.
CREATE TABLE relay_workers (
    id         TEXT   PRIMARY KEY,
    beat       TEXT   NOT NULL,
    seen_at    BIGINT NOT NULL,
    stopped_at BIGINT
);
