-- Jobs per queue and state, the shards summed (migration 0008).
SELECT queue, state, SUM(n)::BIGINT FROM relay_job_counts GROUP BY queue, state HAVING SUM(n) <> 0
