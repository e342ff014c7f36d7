-- The writer's own connection runs no triggers (see writer.rs,
-- `triggers_off`): job ?1 has just left READY; if it headed its group
-- (its head flag, which the status update leaves as it was), the head
-- passes to the next of the group's line: what jobs_head_leave does for
-- other programs. A job without a group, or not a head: one row read.
UPDATE jobs SET head = 1
WHERE id = (SELECT o.id FROM jobs j, jobs o INDEXED BY jobs_group_turn
            WHERE j.id = ?1 AND j.head = 1 AND j.grp IS NOT NULL
              AND o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = j.queue AND o.priority = j.priority
              AND o.grp = j.grp
            ORDER BY o.turn, o.id LIMIT 1)
