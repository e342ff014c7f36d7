-- Relay schema, version 10: a queue's own retention, by final state:
-- how long its SUCCEEDED, DEAD and CANCELLED jobs are kept, in
-- milliseconds after they finished; -1 for forever; NULL for the engine's
-- default (Options::retention).
ALTER TABLE queues ADD COLUMN keep_succeeded INTEGER;
ALTER TABLE queues ADD COLUMN keep_dead INTEGER;
ALTER TABLE queues ADD COLUMN keep_cancelled INTEGER;
