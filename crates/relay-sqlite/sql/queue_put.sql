-- A queue's settings, written whole.
INSERT INTO queues (name, paused, updated_at) VALUES (?1, ?2, ?3)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
