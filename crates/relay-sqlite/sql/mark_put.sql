-- A mark written whole (the batch read it, under the write lock, as absent
-- or expired).
INSERT OR REPLACE INTO marks (key, value, expires_at) VALUES (?1, ?2, ?3)
