-- The throughput history from a minute on ($1), every queue and shard
-- summed, oldest first.
SELECT minute, ''::TEXT, SUM(submitted)::BIGINT, SUM(succeeded)::BIGINT, SUM(failed)::BIGINT, SUM(dead)::BIGINT
FROM relay_throughput
WHERE minute >= $1
GROUP BY minute
ORDER BY minute
