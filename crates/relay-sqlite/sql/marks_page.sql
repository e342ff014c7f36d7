-- The marks with keys in [?1, ?2) kept past ?3, the latest to go first, at
-- most ?4, each value cut to ?5 characters (the dashboard's recent events
-- and open tokens). Along the expiry index, newest first: the page reads
-- its rows and the later-going marks of other kinds, not every mark.
SELECT key, substr(value, 1, ?5), expires_at
FROM marks INDEXED BY marks_expiry
WHERE expires_at > ?3 AND key >= ?1 AND key < ?2
ORDER BY expires_at DESC
LIMIT ?4
