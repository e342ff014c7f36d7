-- The earliest future ready_at of a queue's jobs waiting to be leased:
-- those without a group (relay_jobs_ready), the grouped ones
-- (relay_jobs_group_wait) and the sleeping ones (relay_jobs_sleeping_queue).
SELECT LEAST(
    (SELECT MIN(ready_at) FROM relay_jobs
     WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NULL AND queue = $1 AND ready_at > $2),
    (SELECT MIN(ready_at) FROM relay_jobs
     WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NOT NULL AND queue = $1 AND ready_at > $2),
    (SELECT MIN(ready_at) FROM relay_jobs
     WHERE state = 'WAITING' AND waiting_on = 0 AND queue = $1 AND ready_at > $2))
