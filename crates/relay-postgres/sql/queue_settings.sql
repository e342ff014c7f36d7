-- The settings of the queues a batch claims from that have no limits (no
-- row: the defaults), in the batch's first flight, unlocked: a claim only
-- reads them. Columns as decode::queue_settings reads them.
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, poison_after,
       keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group
FROM relay_queues
WHERE name = ANY($1::TEXT[]) AND max_leased IS NULL AND rate_limit IS NULL AND max_leased_per_group IS NULL
