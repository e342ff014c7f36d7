-- The completion tokens not used yet (no `token:<id>:used` mark) whose
-- marks are kept past $1, the latest to go first, at most $2 (the
-- dashboard's open tokens), along relay_marks_expiry from its newest end.
SELECT m.key, m.value, m.expires_at
FROM relay_marks AS m
WHERE m.expires_at > $1::BIGINT AND m.key COLLATE "C" >= 'token:' AND m.key COLLATE "C" < 'token;'
  AND m.key NOT LIKE '%:used'
  AND NOT EXISTS (SELECT 1 FROM relay_marks AS u WHERE u.key = m.key || ':used')
ORDER BY m.expires_at DESC
LIMIT $2::BIGINT
