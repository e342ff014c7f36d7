-- One queue's throughput history from a minute on (?1), oldest first.
SELECT minute, queue, submitted, succeeded, failed, dead
FROM throughput
WHERE minute >= ?1 AND queue = ?2
ORDER BY minute
