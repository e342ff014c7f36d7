SELECT id FROM jobs
WHERE state = 'LEASED' AND lease_expires_at <= ?1
ORDER BY lease_expires_at
LIMIT ?2
