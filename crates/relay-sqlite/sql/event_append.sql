-- Parameters in this statement are written `+?N`: a bare `?N` here makes
-- SQLite re-prepare the statement each time it is bound after a reset
-- (rusqlite's statement cache clears bindings), measured as most of the
-- writer's CPU. The index is used all the same (tests/plan.rs).
INSERT INTO job_events (job_id, seq, at, kind, data)
VALUES (?1, COALESCE((SELECT MAX(seq) FROM job_events WHERE job_id = +?1), 0) + 1, ?2, ?3, ?4)
RETURNING seq
