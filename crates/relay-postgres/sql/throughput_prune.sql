-- Forgets minutes older than the history keeps; answers how many rows.
WITH d AS (DELETE FROM relay_throughput WHERE minute < $1 RETURNING 1)
SELECT COUNT(*) FROM d
