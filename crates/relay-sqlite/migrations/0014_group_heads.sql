-- Relay schema, version 14: only each group's first READY job of a class
-- (its head) stands in the claim's index of grouped jobs. A group at its
-- max_leased_per_group is then passed over in one row, however long its
-- line: the claim's cost no longer grows with the jobs of groups at their
-- limit. The rest of a group's line is read by jobs_group_turn, in turn
-- order, as the claim takes its jobs (sql/job_group_next.sql).
-- `head` is 1 on the READY job of each (queue, priority, group) with the
-- smallest (turn, id), 0 on every other; it means nothing once the job
-- leaves READY (the partial indexes pass it over). The triggers below keep
-- it, whatever writes the file.
ALTER TABLE jobs ADD COLUMN head INTEGER NOT NULL DEFAULT 0;

DROP INDEX jobs_fair;
DROP INDEX jobs_group_turn;

-- A group's line in a class, in turn order (a continuation read of the
-- claim), and its last turn (the next job of the group that becomes READY
-- in it). `id` and `ready_at` in it so that those reads read nothing else.
CREATE INDEX jobs_group_turn ON jobs (queue, priority, grp, turn, id, ready_at)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- Heads of the READY jobs there are now.
UPDATE jobs SET head = 1
WHERE state = 'READY' AND grp IS NOT NULL
  AND id = (SELECT o.id FROM jobs o INDEXED BY jobs_group_turn
            WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = jobs.queue AND o.priority = jobs.priority
              AND o.grp = jobs.grp
            ORDER BY o.turn, o.id LIMIT 1);

-- The claim of grouped jobs: each group's head, in turn order, one seek
-- per class however many groups and jobs there are. (Only a grouped job is
-- ever a head. With a third term in its WHERE, SQLite no longer reads the
-- probes from the index alone.)
CREATE INDEX jobs_fair ON jobs (queue, priority, turn, id, ready_at, grp)
    WHERE state = 'READY' AND head = 1;

-- A grouped job that becomes READY takes its turn (as in version 13) and
-- is its group's head if the group had no other READY job of its class.
DROP TRIGGER jobs_turn_insert;
DROP TRIGGER jobs_turn_update;

CREATE TRIGGER jobs_turn_insert AFTER INSERT ON jobs
WHEN NEW.grp IS NOT NULL AND NEW.state = 'READY' AND NEW.turn IS NULL
BEGIN
    UPDATE jobs SET turn = max(
        coalesce((SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND grp = NEW.grp AND id <> NEW.id), 0),
        coalesce((SELECT turn FROM jobs INDEXED BY jobs_fair
                  WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = NEW.queue
                    AND priority = NEW.priority AND id <> NEW.id
                  ORDER BY turn, id LIMIT 1), 0)),
        head = NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_group_turn
                           WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue
                             AND priority = NEW.priority AND grp = NEW.grp AND id <> NEW.id)
    WHERE id = NEW.id;
END;

CREATE TRIGGER jobs_turn_update AFTER UPDATE OF state ON jobs
WHEN NEW.grp IS NOT NULL AND NEW.state = 'READY' AND OLD.state <> 'READY'
BEGIN
    UPDATE jobs SET turn = max(
        coalesce((SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND grp = NEW.grp AND id <> NEW.id), 0),
        coalesce((SELECT turn FROM jobs INDEXED BY jobs_fair
                  WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = NEW.queue
                    AND priority = NEW.priority AND id <> NEW.id
                  ORDER BY turn, id LIMIT 1), 0)),
        head = NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_group_turn
                           WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue
                             AND priority = NEW.priority AND grp = NEW.grp AND id <> NEW.id)
    WHERE id = NEW.id;
END;

-- A head that leaves READY (leased, cancelled, made to wait) or is deleted
-- hands the head to the next of its group's line.
CREATE TRIGGER jobs_head_leave AFTER UPDATE OF state ON jobs
WHEN OLD.head = 1 AND OLD.state = 'READY' AND NEW.state <> 'READY' AND OLD.grp IS NOT NULL
BEGIN
    UPDATE jobs SET head = 1
    WHERE id = (SELECT id FROM jobs INDEXED BY jobs_group_turn
                WHERE state = 'READY' AND grp IS NOT NULL AND queue = OLD.queue AND priority = OLD.priority
                  AND grp = OLD.grp
                ORDER BY turn, id LIMIT 1);
END;

CREATE TRIGGER jobs_head_delete AFTER DELETE ON jobs
WHEN OLD.head = 1 AND OLD.state = 'READY' AND OLD.grp IS NOT NULL
BEGIN
    UPDATE jobs SET head = 1
    WHERE id = (SELECT id FROM jobs INDEXED BY jobs_group_turn
                WHERE state = 'READY' AND grp IS NOT NULL AND queue = OLD.queue AND priority = OLD.priority
                  AND grp = OLD.grp
                ORDER BY turn, id LIMIT 1);
END;
