-- The jobs waiting for an event (waits_key), in id order.
SELECT job_id, step FROM waits WHERE key = ?1 ORDER BY job_id
