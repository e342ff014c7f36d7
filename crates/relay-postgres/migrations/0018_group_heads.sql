-- Relay schema, version 18: only each group's first READY job of a class
-- (its head) stands in the claim's index of grouped jobs. A group at its
-- max_leased_per_group is then passed over in one row, however long its
-- line: the claim's cost no longer grows with the jobs of groups at their
-- limit. The rest of a group's line is read by relay_jobs_group_turn, in
-- turn order, as the claim takes its jobs (sql/job_group_next.sql).
-- `head` is true on the READY job of each (queue, priority, group) with
-- the smallest (turn, id), false on the others (two processes may each
-- make one a head at once: both are then claimed as heads, and the group
-- is back to one head when either leaves); it means nothing once the job
-- leaves READY. The triggers below keep it, whatever writes the table.
ALTER TABLE relay_jobs ADD COLUMN IF NOT EXISTS head BOOLEAN NOT NULL DEFAULT false;

DROP INDEX IF EXISTS relay_jobs_fair;
DROP INDEX IF EXISTS relay_jobs_group_turn;

-- A group's line in a class, in turn order (a continuation read of the
-- claim), and its last turn (the next job of the group that becomes READY
-- in it).
CREATE INDEX relay_jobs_group_turn ON relay_jobs (queue, priority, grp, turn, id)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- Heads of the READY jobs there are now.
UPDATE relay_jobs j SET head = true
WHERE j.state = 'READY' AND j.grp IS NOT NULL
  AND j.id = (SELECT o.id FROM relay_jobs o
              WHERE o.state = 'READY' AND o.grp IS NOT NULL AND o.queue = j.queue AND o.priority = j.priority
                AND o.grp = j.grp
              ORDER BY o.turn, o.id LIMIT 1);

-- The claim of grouped jobs: each group's head, in turn order, one seek
-- per class however many groups and jobs there are.
CREATE INDEX relay_jobs_fair ON relay_jobs (queue, priority, turn, id)
    WHERE state = 'READY' AND grp IS NOT NULL AND head;

-- A grouped job that becomes READY takes its turn (as in version 17) and
-- heads its group's line if the group has no head that is free. Another
-- transaction's lock on the head means that it may be taking it (a claim
-- locks the heads it reads): the new job is then a head too, so that the
-- group is never left without one when the first is leased and its
-- transaction, which does not see this one's job, hands the head to no
-- other. A free head is locked FOR SHARE until this transaction commits,
-- so nothing leases it meanwhile (an UPDATE waits for a share lock).
CREATE OR REPLACE FUNCTION relay_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.turn := GREATEST(
        (SELECT max(turn) + 1 FROM relay_jobs
         WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
           AND grp = NEW.grp AND id <> NEW.id),
        (SELECT turn FROM relay_jobs
         WHERE state = 'READY' AND grp IS NOT NULL AND head AND queue = NEW.queue AND priority = NEW.priority
           AND id <> NEW.id
         ORDER BY turn, id LIMIT 1),
        0);
    PERFORM 1 FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND head AND queue = NEW.queue AND priority = NEW.priority
      AND grp = NEW.grp AND id <> NEW.id
    LIMIT 1
    FOR SHARE SKIP LOCKED;
    NEW.head := NOT FOUND;
    RETURN NEW;
END
$$;

-- A head that leaves READY (leased, cancelled, made to wait) or is deleted
-- hands the head to the next of its group's line, unless the group has
-- another. Runs after the statement's rows are all written, so a claim
-- that takes a group's head and the next jobs of its line in one statement
-- hands the head on once, past them. The next job is locked (waited for)
-- before it is made the head.
CREATE OR REPLACE FUNCTION relay_job_head_leave() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM relay_jobs
                   WHERE state = 'READY' AND grp IS NOT NULL AND head AND queue = OLD.queue
                     AND priority = OLD.priority AND grp = OLD.grp AND id <> OLD.id) THEN
        UPDATE relay_jobs SET head = true
        WHERE id = (SELECT id FROM relay_jobs
                    WHERE state = 'READY' AND grp IS NOT NULL AND queue = OLD.queue AND priority = OLD.priority
                      AND grp = OLD.grp AND id <> OLD.id
                    ORDER BY turn, id LIMIT 1
                    FOR UPDATE);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_head_leave ON relay_jobs;
CREATE TRIGGER relay_jobs_head_leave AFTER UPDATE OF state ON relay_jobs FOR EACH ROW
    WHEN (OLD.head AND OLD.state = 'READY' AND NEW.state <> 'READY' AND OLD.grp IS NOT NULL)
    EXECUTE FUNCTION relay_job_head_leave();
DROP TRIGGER IF EXISTS relay_jobs_head_delete ON relay_jobs;
CREATE TRIGGER relay_jobs_head_delete AFTER DELETE ON relay_jobs FOR EACH ROW
    WHEN (OLD.head AND OLD.state = 'READY' AND OLD.grp IS NOT NULL)
    EXECUTE FUNCTION relay_job_head_leave();
