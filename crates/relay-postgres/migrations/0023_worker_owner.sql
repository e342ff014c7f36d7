-- Relay schema, version 23: a worker's record belongs to whoever made it.
-- `secret_sha256` is the SHA-256 (hex) of the secret the server answered
-- the worker's first heartbeat with (`PUT /v1/workers/{id}`); later
-- heartbeats of that id must carry the secret (sql/worker_put.sql).
-- 'local': written by a worker inside a Relay process, which only such
-- workers may write. NULL: written before this version, taken by the
-- first heartbeat of its id (a worker running across the upgrade goes
-- on, and is answered a secret). Before, any client with an API token could overwrite any
-- worker's record (issue 39). The SQLite store's 0017 does the same.
ALTER TABLE relay_workers ADD COLUMN IF NOT EXISTS secret_sha256 TEXT;
