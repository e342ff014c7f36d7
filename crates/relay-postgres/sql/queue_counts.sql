-- Jobs per queue and state, the shards summed (migration 0008), of the
-- queues named from $1 to $2 (byte order, as every page of queues).
SELECT queue, state, SUM(n)::BIGINT FROM relay_job_counts
WHERE queue COLLATE "C" BETWEEN $1 AND $2
GROUP BY queue, state HAVING SUM(n) <> 0
