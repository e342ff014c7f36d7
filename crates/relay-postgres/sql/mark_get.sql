-- A mark's value, unless it has expired.
SELECT value FROM relay_marks WHERE key = $1 AND expires_at > $2
