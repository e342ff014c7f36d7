-- Relay schema, version 13: groups (tenants). A job may carry a group key
-- (`grp`); a queue's claims take its groups in turn, and a queue may bound
-- how many jobs of one group are LEASED at once (max_leased_per_group).
ALTER TABLE jobs ADD COLUMN grp TEXT;
-- A grouped job's place in its queue's round of groups, given each time it
-- becomes READY (the triggers below): one after the group's last READY
-- job of its class, and never before the class's first READY one. So a
-- group's k-th waiting job comes in the k-th round, whatever the other
-- groups hold. NULL for jobs without a group.
ALTER TABLE jobs ADD COLUMN turn INTEGER;
ALTER TABLE queues ADD COLUMN max_leased_per_group INTEGER;

-- The claim of jobs without a group, as before: grouped jobs are not in
-- it (`grp` is in the index only so that the probes read nothing else).
DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, priority, ready_at, id, state, grp)
    WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL;

-- The claim of grouped jobs: READY ones (due by definition; a due
-- SCHEDULED or RETRYING one waits for its promotion) in turn order, one
-- seek per class however many groups and jobs there are.
CREATE INDEX jobs_fair ON jobs (queue, priority, turn, id, ready_at, grp)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- A group's last turn in a class, for the next job of the group that
-- becomes READY in it (per class: a group's backlog of one priority does
-- not push back its jobs of another).
CREATE INDEX jobs_group_turn ON jobs (queue, priority, grp, turn)
    WHERE state = 'READY' AND grp IS NOT NULL;

-- Grouped jobs waiting to be leased by their time: the oldest ready one of
-- a queue (stats, /metrics) and when the next comes due (`state` and `grp`
-- in it so that those probes read nothing else).
CREATE INDEX jobs_group_wait ON jobs (queue, ready_at, state, grp)
    WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NOT NULL;

-- A grouped job that becomes READY takes its turn. Written as triggers so
-- that whatever writes the file gives it one (and the writer's statements
-- stay as they are for jobs without a group, which the WHEN clauses pass
-- over). Relay's own insert of a grouped job gives the turn in the row it
-- writes (sql/job_insert_grouped.sql): the insert trigger is for rows
-- written without one.
CREATE TRIGGER jobs_turn_insert AFTER INSERT ON jobs
WHEN NEW.grp IS NOT NULL AND NEW.state = 'READY' AND NEW.turn IS NULL
BEGIN
    UPDATE jobs SET turn = max(
        coalesce((SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND grp = NEW.grp AND id <> NEW.id), 0),
        coalesce((SELECT turn FROM jobs INDEXED BY jobs_fair
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND id <> NEW.id
                  ORDER BY turn, id LIMIT 1), 0))
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
                  WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
                    AND id <> NEW.id
                  ORDER BY turn, id LIMIT 1), 0))
    WHERE id = NEW.id;
END;
