-- Schedules whose next tick has come, in tick order (the scheduler, about
-- once a second). Columns as decode::schedule reads them.
SELECT name, cron, every_ms, tz, queue, kind, payload, priority, max_attempts, paused, created_at, next_at, last_at, grp
FROM schedules WHERE paused = 0 AND next_at <= ?1 ORDER BY next_at LIMIT ?2
