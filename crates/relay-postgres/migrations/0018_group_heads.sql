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

-- A group's first READY job of a class that this transaction can lock
-- (a job another one holds, reading past the head or acting on it, is
-- passed over: waiting for it could make two transactions wait for each
-- other) is made its head. Returns whether one was.
CREATE OR REPLACE FUNCTION relay_head_next(q TEXT, prio BIGINT, g TEXT, leaving BIGINT) RETURNS BOOLEAN
LANGUAGE plpgsql AS $$
DECLARE
    next BIGINT;
BEGIN
    SELECT id INTO next FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND NOT head AND queue = q AND priority = prio AND grp = g
      AND id <> leaving
    ORDER BY turn, id LIMIT 1
    FOR UPDATE SKIP LOCKED;
    IF next IS NULL THEN
        RETURN false;
    END IF;
    UPDATE relay_jobs SET head = true WHERE id = next;
    RETURN true;
END
$$;

-- Whatever a transaction did to groups' heads, and whatever jobs of
-- groups it holds locked and leaves READY, each group concerned has a head
-- when it commits: called last before the COMMIT (sql/apply_heads.sql)
-- with the ids of the grouped jobs the batch took out of READY (leased,
-- cancelled, made to wait) and of those it holds and leaves READY (a claim
-- read them past a head another transaction held, or as a group's line,
-- and did not take them; an operation on them failed). The groups' locks
-- are taken exclusive here only, each batch in one order (queue,
-- priority, group), so batches never wait for each other in a circle; each
-- waits for the transactions that made jobs READY behind the head (they
-- saw it, so did not head the group themselves) and for the batches before
-- it, and then sees what they did. A group whose first READY job is not a
-- head (it has no head, but for a race that left it two) gets the first
-- job of its line this transaction can lock: one another
-- transaction holds is passed over, and that one gives the group a head
-- when it calls this in turn. Returns how many heads it made.
CREATE OR REPLACE FUNCTION relay_heads_for(ids BIGINT[]) RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
    made INTEGER;
BEGIN
    PERFORM pg_advisory_xact_lock(1380468548, relay_group_lock_key(g.queue, g.priority, g.grp))
    FROM (SELECT DISTINCT queue, priority, grp FROM relay_jobs
          WHERE id = ANY(ids) AND grp IS NOT NULL
          ORDER BY queue, priority, grp) AS g;
    -- Read after the locks are held (a statement of its own, so a new
    -- snapshot): every group's heads at once, one UPDATE for all.
    WITH headless AS MATERIALIZED (
        SELECT g.queue, g.priority, g.grp
        FROM (SELECT DISTINCT queue, priority, grp FROM relay_jobs WHERE id = ANY(ids) AND grp IS NOT NULL) AS g
        LEFT JOIN LATERAL (
            SELECT f.head FROM relay_jobs f
            WHERE f.state = 'READY' AND f.grp IS NOT NULL AND f.queue = g.queue AND f.priority = g.priority
              AND f.grp = g.grp
            ORDER BY f.turn, f.id LIMIT 1
        ) AS first ON true
        WHERE first.head IS NOT TRUE
    ), n AS (
        SELECT x.id
        FROM headless AS g
        CROSS JOIN LATERAL (
            SELECT j.id FROM relay_jobs j
            WHERE j.state = 'READY' AND j.grp IS NOT NULL AND NOT j.head AND j.queue = g.queue
              AND j.priority = g.priority AND j.grp = g.grp
            ORDER BY j.turn, j.id LIMIT 1
            FOR UPDATE SKIP LOCKED
        ) AS x
    )
    UPDATE relay_jobs SET head = true FROM n WHERE relay_jobs.id = n.id;
    GET DIAGNOSTICS made = ROW_COUNT;
    RETURN made;
END
$$;

-- A head deleted (a job deleted while READY) hands the head to the next of
-- its group's line unless the group has another, as relay_heads_for does
-- for one group. Other changes that take a head out of READY are Relay's
-- own batches, which call relay_heads_for; another program that does so
-- calls it too (SELECT relay_heads_for(ARRAY[id])), or the group's jobs
-- are not claimed until something does.
CREATE OR REPLACE FUNCTION relay_job_head_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(1380468548, relay_group_lock_key(OLD.queue, OLD.priority, OLD.grp));
    PERFORM 1 FROM relay_jobs
    WHERE state = 'READY' AND head AND queue = OLD.queue AND priority = OLD.priority AND grp = OLD.grp
      AND id <> OLD.id
    ORDER BY id LIMIT 1;
    IF NOT FOUND THEN
        PERFORM relay_head_next(OLD.queue, OLD.priority, OLD.grp, OLD.id);
    END IF;
    RETURN NULL;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_head_delete ON relay_jobs;
CREATE TRIGGER relay_jobs_head_delete AFTER DELETE ON relay_jobs FOR EACH ROW
    WHEN (OLD.head AND OLD.state = 'READY' AND OLD.grp IS NOT NULL)
    EXECUTE FUNCTION relay_job_head_delete();
