-- A debounced submit's payload, replacing an existing job's (its guarded
-- status update is in the same batch).
UPDATE jobs SET payload = ?2 WHERE id = ?1
