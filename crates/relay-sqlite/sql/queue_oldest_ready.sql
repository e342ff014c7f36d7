SELECT queue, MIN(ready_at) FROM jobs WHERE state = 'READY' AND ready_at <= ?1 GROUP BY queue
