-- Before a batch changes a queue's settings: its row, created with the
-- defaults if it has none, so that queue_lock.sql can lock it (two batches
-- that change a new queue's settings at once then take turns, rather than
-- the second overwriting the first).
INSERT INTO relay_queues (name, paused, window_start, window_count, updated_at)
VALUES ($1, false, 0, 0, $2)
ON CONFLICT (name) DO NOTHING
