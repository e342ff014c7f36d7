-- The next sequence number of a job's events (1 for its first). The
-- parameter is written `+?1` so that SQLite does not re-prepare this MAX
-- probe each time it is bound (see tests/plan.rs); the primary key is used.
SELECT COALESCE(MAX(seq), 0) + 1 FROM job_events WHERE job_id = +?1
