-- The jobs waiting for an event (relay_waits_key), in id order.
SELECT job_id, step FROM relay_waits WHERE key = $1 ORDER BY job_id
