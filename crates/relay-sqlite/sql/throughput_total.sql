-- The throughput history from a minute on (?1), every queue summed, oldest
-- first.
SELECT minute, '', SUM(submitted), SUM(succeeded), SUM(failed), SUM(dead)
FROM throughput
WHERE minute >= ?1
GROUP BY minute
ORDER BY minute
