-- Jobs per queue and state, as the writers keep them (migration 0006).
SELECT queue, state, n FROM job_counts WHERE n <> 0
