-- A queue's settings, locked until the batch commits (see queue_lock_insert.sql).
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, poison_after,
       keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group
FROM relay_queues WHERE name = $1
FOR UPDATE
