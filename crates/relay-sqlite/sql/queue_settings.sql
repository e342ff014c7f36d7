-- One queue's settings (no row: the defaults). Read with every claim of the
-- queue: a primary-key lookup in a table of a few rows. Columns as
-- decode::queue_settings reads them.
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, poison_after,
       keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group
FROM queues WHERE name = ?1
