-- The settings of the queues a batch claims from (no row: the defaults), in
-- the batch's first flight, before their candidates.
SELECT name, paused FROM relay_queues WHERE name = ANY($1::TEXT[])
