-- A transition's event, numbered after the job's last one, in one statement
-- (no RETURNING: the caller does not need the number). The parameter in
-- the MAX probe is written `+?1` so that SQLite does not re-prepare the
-- statement each time it is bound (see tests/plan.rs).
INSERT INTO job_events (job_id, seq, at, kind, data)
VALUES (?1, COALESCE((SELECT MAX(seq) FROM job_events WHERE job_id = +?1), 0) + 1, ?2, ?3, ?4)
