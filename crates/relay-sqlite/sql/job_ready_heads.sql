-- Parameters in this statement are written `+?N`: a bare `?N` here makes
-- SQLite re-prepare the statement each time it is bound after a reset
-- (rusqlite's statement cache clears bindings), measured as most of the
-- writer's CPU. The index is used all the same (tests/plan.rs).
-- The oldest due jobs without a group of each class (READY, or SCHEDULED or
-- RETRYING and not promoted yet): four probes of jobs_ready; then the
-- heads of the groups of each class (each group's first READY job) in turn
-- order: four probes of jobs_fair.
-- Each is one index seek, so the cost grows neither with the number of
-- waiting jobs nor with the number of groups.
-- The limit is a literal (a bound LIMIT re-prepares): sql.rs makes one copy
-- of this statement per page size.
SELECT * FROM (SELECT id, priority, ready_at, NULL, NULL FROM jobs
               WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 0 AND ready_at <= +?2
               ORDER BY ready_at, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, NULL, NULL FROM jobs
               WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 1 AND ready_at <= +?2
               ORDER BY ready_at, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, NULL, NULL FROM jobs
               WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 2 AND ready_at <= +?2
               ORDER BY ready_at, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, NULL, NULL FROM jobs
               WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 3 AND ready_at <= +?2
               ORDER BY ready_at, id LIMIT 1)

UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, turn, grp FROM jobs
               WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?1 AND priority = 0
               ORDER BY turn, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, turn, grp FROM jobs
               WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?1 AND priority = 1
               ORDER BY turn, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, turn, grp FROM jobs
               WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?1 AND priority = 2
               ORDER BY turn, id LIMIT 1)
UNION ALL
SELECT * FROM (SELECT id, priority, ready_at, turn, grp FROM jobs
               WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?1 AND priority = 3
               ORDER BY turn, id LIMIT 1)
