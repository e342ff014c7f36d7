-- Relay schema, version 8: a queue's own poison-pill threshold (a job
-- whose lease expires this many times is DEAD). NULL: the engine's
-- default (Options::poison_after); 0: expiries alone never kill.
ALTER TABLE queues ADD COLUMN poison_after INTEGER;
