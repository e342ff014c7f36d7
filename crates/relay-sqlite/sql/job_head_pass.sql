-- The writer's own connection runs no triggers (see writer.rs,
-- `triggers_off`): a job of group (?1, ?2, ?3: queue, priority, group)
-- has just left READY or been deleted; if it was the group's head (?4:
-- its head flag), the head passes to the next of the group's line: what
-- jobs_group_state and jobs_head_delete do for other programs.
UPDATE jobs SET head = 1
WHERE ?4 = 1
  AND id = (SELECT o.id FROM jobs o INDEXED BY jobs_group_turn
            WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = +?1 AND o.priority = +?2 AND o.grp = +?3
            ORDER BY o.turn, o.id LIMIT 1)
