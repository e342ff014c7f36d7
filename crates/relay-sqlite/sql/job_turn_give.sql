-- The writer's own connection runs no triggers (see writer.rs,
-- `triggers_off`): job ?1 has just become READY; if it has a group, it
-- takes its turn (one after its group's last READY job of its class,
-- never before the class's front) and heads its group if it had no other
-- READY job of its class: what jobs_turn_update does for other programs
-- (migrations/0015_schedule_groups.sql). A job without a group: one row
-- read, nothing written.
UPDATE jobs SET turn = max(
    coalesce((SELECT max(o.turn) + 1 FROM jobs o INDEXED BY jobs_group_turn
              WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = jobs.queue AND o.priority = jobs.priority
                AND o.grp = jobs.grp AND o.id <> jobs.id), 0),
    coalesce((SELECT f.turn FROM jobs f INDEXED BY jobs_fair
              WHERE f.state = 'READY' AND f.grp IS NOT NULL AND f.head = 1 AND f.queue = jobs.queue
                AND f.priority = jobs.priority AND f.id <> jobs.id
              ORDER BY f.turn, f.id LIMIT 1), 0)),
    head = NOT EXISTS (SELECT 1 FROM jobs o INDEXED BY jobs_group_turn
                       WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = jobs.queue
                         AND o.priority = jobs.priority AND o.grp = jobs.grp AND o.id <> jobs.id)
WHERE id = ?1 AND grp IS NOT NULL AND state = 'READY'
