-- Workers last seen before $1 (gone or stopped long ago). Answers how many.
WITH gone AS (DELETE FROM relay_workers WHERE seen_at < $1 RETURNING 1)
SELECT COUNT(*) FROM gone
