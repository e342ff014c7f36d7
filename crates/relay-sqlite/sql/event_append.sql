-- No RETURNING: SQLite runs RETURNING through a temporary table (a pager
-- opened and closed per statement), measured at ~5% of the writer's time.
-- The sequence number comes from event_next_seq.sql in the same transaction.
INSERT INTO job_events (job_id, seq, at, kind, data) VALUES (?1, ?2, ?3, ?4, ?5)
