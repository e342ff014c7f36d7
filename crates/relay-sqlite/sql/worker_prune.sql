-- Workers last seen before ?1 (gone or stopped long ago); a scan of a
-- table of a few rows per worker process.
DELETE FROM workers WHERE seen_at < ?1
