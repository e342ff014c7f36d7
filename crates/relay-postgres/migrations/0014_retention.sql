-- A queue's own retention, by final state: how long its SUCCEEDED, DEAD
-- and CANCELLED jobs are kept, in milliseconds after they finished; -1 for
-- forever; NULL for the engine's default (Options::retention).
ALTER TABLE relay_queues ADD COLUMN keep_succeeded BIGINT;
ALTER TABLE relay_queues ADD COLUMN keep_dead BIGINT;
ALTER TABLE relay_queues ADD COLUMN keep_cancelled BIGINT;
