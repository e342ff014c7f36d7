-- The completion tokens not used yet (no `token:<id>:used` mark) whose
-- marks are kept past ?1, the latest to go first, at most ?2 (the
-- dashboard's open tokens), along the expiry index from its newest end.
SELECT m.key, m.value, m.expires_at
FROM marks AS m INDEXED BY marks_expiry
WHERE m.expires_at > ?1 AND m.key >= 'token:' AND m.key < 'token;' AND m.key NOT LIKE '%:used'
  AND NOT EXISTS (SELECT 1 FROM marks AS u WHERE u.key = m.key || ':used')
ORDER BY m.expires_at DESC
LIMIT ?2
