-- Relay schema, version 17: groups (tenants). A job may carry a group key
-- (`grp`); a queue's claims take its groups in turn, and a queue may bound
-- how many jobs of one group are LEASED at once (max_leased_per_group).
ALTER TABLE relay_jobs ADD COLUMN IF NOT EXISTS grp TEXT;
-- A grouped job's place in its queue's round of groups, given each time it
-- becomes READY (the trigger below): one after the group's last READY job
-- of its class, and never before the class's first READY one. So a group's
-- k-th waiting job comes in the k-th round, whatever the other groups
-- hold. NULL for jobs without a group.
ALTER TABLE relay_jobs ADD COLUMN IF NOT EXISTS turn BIGINT;
ALTER TABLE relay_queues ADD COLUMN IF NOT EXISTS max_leased_per_group BIGINT;

-- The claim of jobs without a group, as before: grouped jobs are not in it.
DROP INDEX relay_jobs_ready;
CREATE INDEX relay_jobs_ready ON relay_jobs (queue, priority, ready_at, id)
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NULL;

-- The claim of grouped jobs: READY ones (due by definition; a due
-- SCHEDULED or RETRYING one waits for its promotion) in turn order, one
-- seek per class however many groups and jobs there are.
CREATE INDEX relay_jobs_fair ON relay_jobs (queue, priority, turn, id)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- A group's last turn in a class, for the next job of the group that
-- becomes READY in it (per class: a group's backlog of one priority does
-- not push back its jobs of another).
CREATE INDEX relay_jobs_group_turn ON relay_jobs (queue, priority, grp, turn)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- Grouped jobs waiting to be leased by their time: the oldest ready one of
-- a queue (stats, /metrics) and when the next comes due.
CREATE INDEX relay_jobs_group_wait ON relay_jobs (queue, ready_at)
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NOT NULL;

-- A grouped job that becomes READY takes its turn: a row trigger, so that
-- the rows one statement writes see each other's turns (a BEFORE trigger's
-- queries see the rows the statement wrote before), and whatever writes
-- the table gives one. The WHEN clauses pass every job without a group
-- over without calling the function. Two processes making jobs of one
-- group READY at once may give two of them one turn: they are then taken
-- in id order.
CREATE OR REPLACE FUNCTION relay_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.turn := GREATEST(
        (SELECT max(turn) + 1 FROM relay_jobs
         WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
           AND grp = NEW.grp AND id <> NEW.id),
        (SELECT turn FROM relay_jobs
         WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority AND id <> NEW.id
         ORDER BY turn, id LIMIT 1),
        0);
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_turn_insert ON relay_jobs;
CREATE TRIGGER relay_jobs_turn_insert BEFORE INSERT ON relay_jobs FOR EACH ROW
    WHEN (NEW.grp IS NOT NULL AND NEW.state = 'READY') EXECUTE FUNCTION relay_job_turn();
DROP TRIGGER IF EXISTS relay_jobs_turn_update ON relay_jobs;
CREATE TRIGGER relay_jobs_turn_update BEFORE UPDATE OF state ON relay_jobs FOR EACH ROW
    WHEN (NEW.grp IS NOT NULL AND NEW.state = 'READY' AND OLD.state <> 'READY') EXECUTE FUNCTION relay_job_turn();
