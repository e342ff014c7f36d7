SELECT queue, state, COUNT(*) FROM jobs GROUP BY queue, state
