-- A mark's value, unless it has expired.
SELECT value FROM marks WHERE key = ?1 AND expires_at > ?2
