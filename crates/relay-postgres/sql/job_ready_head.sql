-- The oldest due READY job of one class: one probe of relay_jobs_ready.
-- SKIP LOCKED: a head another Relay process is claiming is passed over, so
-- processes never wait on each other's candidates.
SELECT id, priority, ready_at FROM relay_jobs
WHERE state = 'READY' AND queue = $1 AND priority = $2 AND ready_at <= $3
ORDER BY ready_at, id
LIMIT 1
FOR UPDATE SKIP LOCKED
