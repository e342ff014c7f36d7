-- Parameters in this statement are written `+?N`: a bare `?N` here makes
-- SQLite re-prepare the statement each time it is bound after a reset
-- (rusqlite's statement cache clears bindings), measured as most of the
-- writer's CPU. The index is used all the same (tests/plan.rs).
-- The earliest future ready_at in a queue: one probe per class of the jobs
-- without a group (jobs_ready), one of the grouped ones (jobs_group_wait),
-- one of the sleeping ones (jobs_sleeping_queue).
SELECT MIN(t) FROM (
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 0 AND ready_at > +?2) AS t
    UNION ALL
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 1 AND ready_at > +?2)
    UNION ALL
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 2 AND ready_at > +?2)
    UNION ALL
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = +?1 AND priority = 3 AND ready_at > +?2)
    UNION ALL
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NOT NULL AND queue = +?1 AND ready_at > +?2)
    UNION ALL
    SELECT (SELECT MIN(ready_at) FROM jobs WHERE state = 'WAITING' AND waiting_on = 0 AND queue = +?1 AND ready_at > +?2)
)
