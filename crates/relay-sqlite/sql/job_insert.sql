-- No RETURNING (it costs a temporary table per statement): the new id is
-- the connection's last_insert_rowid.
INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                  unique_key, lease_token)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
