-- Schedules whose next tick has come, in tick order, locked until the batch
-- commits; a row another process's scheduler holds is passed over (it is
-- taking that tick). Columns as decode::schedule reads them.
SELECT name, cron, every_ms, tz, queue, kind, payload, priority, max_attempts, paused, created_at, next_at, last_at, grp
FROM relay_schedules WHERE NOT paused AND next_at <= $1 ORDER BY next_at LIMIT $2
FOR UPDATE SKIP LOCKED
