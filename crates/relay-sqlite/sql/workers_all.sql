-- Every worker, by id. Columns as decode::worker reads them.
SELECT id, beat, seen_at, stopped_at FROM workers ORDER BY id
