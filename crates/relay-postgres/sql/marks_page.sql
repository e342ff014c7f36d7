-- The marks with keys in [$1, $2) kept past $3, the latest to go first, at
-- most $4, each value cut to $5 characters (the dashboard's recent events
-- and open tokens), read along relay_marks_expiry from its newest end. The
-- bounds compare in byte order, as the SQLite store's do.
SELECT key, substr(value, 1, $5::INT), expires_at
FROM relay_marks
WHERE expires_at > $3::BIGINT AND key COLLATE "C" >= $1::TEXT AND key COLLATE "C" < $2::TEXT
ORDER BY expires_at DESC
LIMIT $4::BIGINT
