-- The throughput history from a minute on, oldest first.
SELECT minute, queue, submitted, succeeded, failed, dead
FROM throughput
WHERE minute >= ?1
ORDER BY minute, queue
