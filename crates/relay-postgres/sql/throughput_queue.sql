-- One queue's throughput history from a minute on ($1), oldest first, the
-- shards summed.
SELECT minute, queue, SUM(submitted)::BIGINT, SUM(succeeded)::BIGINT, SUM(failed)::BIGINT, SUM(dead)::BIGINT
FROM relay_throughput
WHERE minute >= $1 AND queue = $2
GROUP BY minute, queue
ORDER BY minute
