-- The settings of the queues a batch claims from that have limits, locked
-- until the batch commits (in name order, the same in every process): one
-- batch at a time claims from a limited queue, so its count of leased jobs
-- and its rate window are exact. First in the batch's first flight.
SELECT name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, poison_after,
       keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group
FROM relay_queues
WHERE name = ANY($1::TEXT[]) AND (max_leased IS NOT NULL OR rate_limit IS NOT NULL OR max_leased_per_group IS NOT NULL)
ORDER BY name
FOR UPDATE
