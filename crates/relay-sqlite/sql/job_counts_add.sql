-- Adds a batch's change to the count of one queue's jobs in one state.
INSERT INTO job_counts (queue, state, n) VALUES (?1, ?2, ?3)
ON CONFLICT (queue, state) DO UPDATE SET n = n + excluded.n
