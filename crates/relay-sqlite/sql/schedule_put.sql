-- A schedule, written whole.
INSERT INTO schedules (name, cron, every_ms, tz, queue, kind, payload, priority, max_attempts, paused, created_at,
                       next_at, last_at, grp)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14)
ON CONFLICT (name) DO UPDATE SET
    cron = excluded.cron, every_ms = excluded.every_ms, tz = excluded.tz, queue = excluded.queue,
    kind = excluded.kind, payload = excluded.payload, priority = excluded.priority,
    max_attempts = excluded.max_attempts, paused = excluded.paused, created_at = excluded.created_at,
    next_at = excluded.next_at, last_at = excluded.last_at, grp = excluded.grp
