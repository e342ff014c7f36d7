SELECT queue, state, COUNT(*) FROM relay_jobs GROUP BY queue, state
