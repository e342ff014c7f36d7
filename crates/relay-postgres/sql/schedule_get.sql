-- One schedule, locked for the batch to change. Columns as decode::schedule
-- reads them.
SELECT name, cron, every_ms, tz, queue, kind, payload, priority, max_attempts, paused, created_at, next_at, last_at, grp
FROM relay_schedules WHERE name = $1
FOR UPDATE
