-- One schedule. Columns as decode::schedule reads them.
SELECT name, cron, every_ms, tz, queue, kind, payload, priority, max_attempts, paused, created_at, next_at, last_at, grp
FROM schedules WHERE name = ?1
