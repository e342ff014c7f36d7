-- The next page of one class of a queue's group heads (each group's first
-- READY job, migrations/0014_group_heads.sql) in turn
-- order, after (turn, id) = (?3, ?4): one seek of jobs_fair. `+?N` as in
-- job_ready_heads.sql; the limit is a literal, replaced by sql.rs for each
-- page size.
SELECT id, priority, ready_at, turn, grp FROM jobs
WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?1 AND priority = +?2 AND (turn, id) > (+?3, +?4)
ORDER BY turn, id LIMIT 1
