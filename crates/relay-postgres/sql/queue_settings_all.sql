-- The settings of the queues named from $1 to $2, for stats.
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, poison_after,
       keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group
FROM relay_queues WHERE name COLLATE "C" BETWEEN $1 AND $2 ORDER BY name COLLATE "C"
