-- SKIP LOCKED: whichever process gets to an expired lease first reclaims it,
-- exactly once.
SELECT id FROM relay_jobs
WHERE state = 'LEASED' AND lease_expires_at <= $1
ORDER BY lease_expires_at
LIMIT 256
FOR UPDATE SKIP LOCKED
