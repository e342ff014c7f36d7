-- A worker's heartbeat, written whole; ?4 set: it said it stopped then.
-- Only by its owner (migrations/0017_worker_owner.sql): an existing record
-- is overwritten when the caller presents its secret's hash ?5 (a caller
-- over HTTP, ?6, must present one; an in-process worker presents 'local',
-- its records' mark), when it was last seen before ?7 (forgotten: its id
-- is free again), or when it has no mark at all (written before schema
-- 17: the first caller takes it). ?8: what the record keeps. No row
-- changed: not the caller's. The PostgreSQL store's worker_put.sql does
-- the same.
INSERT INTO workers (id, beat, seen_at, stopped_at, secret_sha256) VALUES (?1, ?2, ?3, ?4, ?8)
ON CONFLICT (id) DO UPDATE SET beat = excluded.beat, seen_at = excluded.seen_at, stopped_at = excluded.stopped_at,
    secret_sha256 = excluded.secret_sha256
WHERE workers.secret_sha256 IS NULL OR (workers.secret_sha256 IS ?5 AND NOT (?6 AND ?5 IS NULL))
   OR workers.seen_at < ?7
