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
-- Made again last (below): the planner breaks ties between indexes by
-- their age, and this one, whose first column is only the queue, must lose
-- them (the triggers' plans are generic, made once per connection, often
-- while the table is empty and every index looks alike).
DROP INDEX IF EXISTS relay_jobs_group_wait;

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

-- A group's heads (one but for a race), for the triggers below (`id` in
-- it so that their read, ordered by it, is planned on this index: in a
-- generic plan over an empty table, relay_jobs_fair looked as cheap).
CREATE INDEX relay_jobs_group_head ON relay_jobs (queue, priority, grp, id)
    WHERE state = 'READY' AND head;

-- The claim of grouped jobs: each group's head, in turn order, one seek
-- per class however many groups and jobs there are.
CREATE INDEX relay_jobs_fair ON relay_jobs (queue, priority, turn, id)
    WHERE state = 'READY' AND grp IS NOT NULL AND head;

-- As in version 17.
CREATE INDEX relay_jobs_group_wait ON relay_jobs (queue, ready_at)
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NOT NULL;

-- Two transactions must never each leave a group without a head: one
-- taking the head (it sees no other READY job, so hands the head to no
-- one) while the other makes a job READY behind it (it sees the head, so
-- does not head the group itself). Each (queue, priority, group) has a
-- transaction-level advisory lock for this (key space RHGD, then the
-- group's hash; other groups sharing a hash only wait for each other): a
-- transaction that makes a job READY tries for it shared, one that takes a
-- head waits for it exclusive.
CREATE OR REPLACE FUNCTION relay_group_lock_key(queue TEXT, priority BIGINT, grp TEXT) RETURNS INTEGER
LANGUAGE sql IMMUTABLE AS $$ SELECT hashtext(queue || chr(1) || priority::TEXT || chr(1) || grp) $$;

-- A grouped job that becomes READY takes its turn (as in version 17) and
-- heads its group's line if the group has no other READY job of its class.
-- That is read once the group's lock is held shared: every transaction
-- that took a head of the group before has committed (and handed it on),
-- and any that takes one later waits for this one to commit, and then
-- sees this job. When a transaction taking a head holds the lock, it may
-- not see this job when it hands the head on: the job then heads the
-- group too (two heads are both claimed as heads, and the group is back
-- to one when either leaves). Trying, not waiting, for the lock: a claim
-- holding it may itself wait for a row this transaction holds.
CREATE OR REPLACE FUNCTION relay_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    free BOOLEAN := pg_try_advisory_xact_lock_shared(1380468548, relay_group_lock_key(NEW.queue, NEW.priority, NEW.grp));
    last BIGINT;
    front BIGINT;
BEGIN
    SELECT turn INTO last FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
      AND grp = NEW.grp AND id <> NEW.id
    ORDER BY turn DESC, id DESC LIMIT 1;
    SELECT turn INTO front FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND head AND queue = NEW.queue AND priority = NEW.priority
      AND id <> NEW.id
    ORDER BY turn, id LIMIT 1;
    NEW.turn := GREATEST(last + 1, front, 0);
    NEW.head := last IS NULL OR NOT free;
    RETURN NEW;
END
$$;

-- A head that leaves READY (leased, cancelled, made to wait) or is deleted
-- hands the head to the next of its group's line, unless the group has
-- another head. It first waits for the group's lock, exclusive: the
-- transactions that made jobs READY behind the head without heading the
-- group (they saw this head) have then committed, and are seen; so has any
-- other that took a head of the group (two heads taken at once by two
-- transactions would otherwise each count on the other). Runs
-- after the statement's rows are all written, so a claim that takes a
-- group's head and the next jobs of its line in one statement hands the
-- head on once, past them.
CREATE OR REPLACE FUNCTION relay_job_head_leave() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    next BIGINT;
BEGIN
    PERFORM pg_advisory_xact_lock(1380468548, relay_group_lock_key(OLD.queue, OLD.priority, OLD.grp));
    PERFORM 1 FROM relay_jobs
    WHERE state = 'READY' AND head AND queue = OLD.queue AND priority = OLD.priority AND grp = OLD.grp
      AND id <> OLD.id
    ORDER BY id LIMIT 1;
    IF NOT FOUND THEN
        -- The first of the rest of the line; if another transaction
        -- changed it meanwhile (the UPDATE waits for it, then checks the
        -- row again), the next.
        LOOP
            SELECT id INTO next FROM relay_jobs
            WHERE state = 'READY' AND grp IS NOT NULL AND NOT head AND queue = OLD.queue
              AND priority = OLD.priority AND grp = OLD.grp AND id <> OLD.id
            ORDER BY turn, id LIMIT 1;
            EXIT WHEN next IS NULL;
            UPDATE relay_jobs SET head = true WHERE id = next AND state = 'READY' AND NOT head;
            EXIT WHEN FOUND;
        END LOOP;
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
