-- The throughput history from a minute on, oldest first, the shards summed.
SELECT minute, queue, SUM(submitted)::BIGINT, SUM(succeeded)::BIGINT, SUM(failed)::BIGINT, SUM(dead)::BIGINT
FROM relay_throughput
WHERE minute >= $1
GROUP BY minute, queue
ORDER BY minute, queue
