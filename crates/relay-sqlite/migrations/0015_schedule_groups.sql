-- Relay schema, version 15: a schedule's jobs may carry a group, and a
-- group keeps exactly one head whatever another program writes.
-- (Relay's own writer runs no triggers: its statements do their work,
-- src/writer.rs `triggers_off`. These are for every other connection.)
ALTER TABLE schedules ADD COLUMN grp TEXT;

-- A READY grouped job inserted with its turn already set (another program
-- copying rows; Relay's own writer runs no triggers): when its head flag
-- disagrees with its place in its group's line (it comes before the
-- group's first READY job, or it is the group's only one, or it claims a
-- head it is not), or it heads a line that had a head, the flags of the
-- group's first two are set again. Without this a copied row could leave
-- its group with no head, and its jobs never claimed, or with two.
CREATE TRIGGER jobs_head_insert_given AFTER INSERT ON jobs
WHEN NEW.grp IS NOT NULL AND NEW.state = 'READY' AND NEW.turn IS NOT NULL
  AND (NEW.head IS NOT coalesce(
           (SELECT NEW.turn < o.turn OR (NEW.turn = o.turn AND NEW.id < o.id)
            FROM jobs o INDEXED BY jobs_group_turn
            WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = NEW.queue AND o.priority = NEW.priority
              AND o.grp = NEW.grp AND o.id <> NEW.id
            ORDER BY o.turn, o.id LIMIT 1), 1)
       OR (NEW.head = 1
           AND EXISTS (SELECT 1 FROM jobs o INDEXED BY jobs_group_turn
                       WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = NEW.queue
                         AND o.priority = NEW.priority AND o.grp = NEW.grp AND o.id <> NEW.id)))
BEGIN
    UPDATE jobs SET head = (id = (SELECT f.id FROM jobs f INDEXED BY jobs_group_turn
                                  WHERE f.state = 'READY' AND f.grp IS NOT NULL AND f.queue = NEW.queue
                                    AND f.priority = NEW.priority AND f.grp = NEW.grp
                                  ORDER BY f.turn, f.id LIMIT 1))
    WHERE id IN (SELECT NEW.id
                 UNION ALL
                 SELECT * FROM (SELECT o.id FROM jobs o INDEXED BY jobs_group_turn
                                WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = NEW.queue
                                  AND o.priority = NEW.priority AND o.grp = NEW.grp AND o.id <> NEW.id
                                ORDER BY o.turn, o.id LIMIT 1));
END;

-- A READY job moved to another queue, priority or group (Relay never
-- does; an operator's SQL may): it leaves its old group's line, whose head
-- passes on if it was the head, and joins the new one's as a job that
-- becomes READY does (one after the group's last turn, never before the
-- class's front), heading it if it is alone there. A job moved out of
-- every group heads nothing.
CREATE TRIGGER jobs_group_move AFTER UPDATE OF queue, priority, grp ON jobs
WHEN OLD.state = 'READY' AND NEW.state = 'READY'
  AND (OLD.queue IS NOT NEW.queue OR OLD.priority IS NOT NEW.priority OR OLD.grp IS NOT NEW.grp)
BEGIN
    UPDATE jobs SET head = 1
    WHERE OLD.grp IS NOT NULL AND OLD.head = 1
      AND id = (SELECT id FROM jobs INDEXED BY jobs_group_turn
                WHERE state = 'READY' AND grp IS NOT NULL AND queue = OLD.queue AND priority = OLD.priority
                  AND grp = OLD.grp AND id <> NEW.id
                ORDER BY turn, id LIMIT 1);
    UPDATE jobs SET turn = CASE WHEN NEW.grp IS NULL THEN NULL ELSE max(
        coalesce((SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND grp = NEW.grp AND id <> NEW.id), 0),
        coalesce((SELECT turn FROM jobs INDEXED BY jobs_fair
                  WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = NEW.queue
                    AND priority = NEW.priority AND id <> NEW.id
                  ORDER BY turn, id LIMIT 1), 0)) END,
        head = NEW.grp IS NOT NULL
               AND NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_group_turn
                               WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue
                                 AND priority = NEW.priority AND grp = NEW.grp AND id <> NEW.id)
    WHERE id = NEW.id;
END;
