-- Jobs per queue and state, as the writers keep them (migration 0006), of
-- the queues named from ?1 to ?2.
SELECT queue, state, n FROM job_counts WHERE n <> 0 AND queue BETWEEN ?1 AND ?2
