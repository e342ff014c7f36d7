-- Every worker, by id. Columns as the reader decodes them.
SELECT id, beat, seen_at, stopped_at FROM relay_workers ORDER BY id
