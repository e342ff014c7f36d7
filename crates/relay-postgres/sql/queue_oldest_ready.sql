SELECT queue, MIN(ready_at) FROM relay_jobs WHERE state = 'READY' AND ready_at <= $1 GROUP BY queue
