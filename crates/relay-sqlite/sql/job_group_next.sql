-- The next of one group's READY jobs of one class after (turn, id) = (?4,
-- ?5), in turn order: the claim reads a group's line here once it has
-- taken the group's head (jobs_fair holds heads only). One seek of
-- jobs_group_turn. `+?N` as in job_ready_heads.sql; the limit is a literal,
-- replaced by sql.rs for each page size.
SELECT id, priority, ready_at, turn, grp FROM jobs
WHERE state = 'READY' AND grp IS NOT NULL AND queue = +?1 AND priority = +?2 AND grp = +?3
  AND (turn, id) > (+?4, +?5)
ORDER BY turn, id LIMIT 1
