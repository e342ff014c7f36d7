-- A worker's heartbeat, written whole; $4 set: it said it stopped then.
-- Only by its owner (migrations/0023_worker_owner.sql): an existing record
-- is overwritten when the caller presents its secret's hash $5 (a caller
-- over HTTP, $6, must present one; an in-process worker presents 'local',
-- its records' mark), when it was last seen before $7 (forgotten: its id
-- is free again), or when it has no mark at all (written before schema
-- 23: the first caller takes it). $8: what the record keeps. No row
-- returned: not the caller's. Two first heartbeats of one id at once: one inserts, the
-- other meets its row and presents no hash, and is refused. The SQLite
-- store's worker_put.sql does the same.
INSERT INTO relay_workers (id, beat, seen_at, stopped_at, secret_sha256) VALUES ($1, $2, $3, $4, $8)
ON CONFLICT (id) DO UPDATE SET beat = excluded.beat, seen_at = excluded.seen_at, stopped_at = excluded.stopped_at,
    secret_sha256 = excluded.secret_sha256
WHERE relay_workers.secret_sha256 IS NULL
   OR (relay_workers.secret_sha256 IS NOT DISTINCT FROM $5::TEXT AND NOT ($6::BOOLEAN AND $5::TEXT IS NULL))
   OR relay_workers.seen_at < $7
RETURNING 1
