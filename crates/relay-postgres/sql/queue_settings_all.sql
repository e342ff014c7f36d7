-- Every queue's settings, for stats.
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count
FROM relay_queues ORDER BY name
