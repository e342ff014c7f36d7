-- Relay schema, version 20: a schedule's jobs may carry a group, and a
-- READY job moved to another group or class keeps both lines headed.
ALTER TABLE relay_schedules ADD COLUMN IF NOT EXISTS grp TEXT;

-- The turn of a job (p_id) that becomes READY in group p_grp of class
-- (p_queue, p_priority): one after the group's last READY job of the class,
-- never before the class's front (the heads give it). As in version 19's
-- relay_job_turn, which now calls it, and for a job moved between groups.
CREATE OR REPLACE FUNCTION relay_turn_for(p_queue TEXT, p_priority BIGINT, p_grp TEXT, p_id BIGINT)
RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
    last BIGINT;
    front BIGINT;
BEGIN
    SELECT turn INTO last FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND queue = p_queue AND priority = p_priority
      AND grp = p_grp AND id <> p_id
    ORDER BY turn DESC, id DESC LIMIT 1;
    SELECT turn INTO front FROM relay_group_heads
    WHERE queue = p_queue AND priority = p_priority
    ORDER BY turn, job LIMIT 1;
    RETURN GREATEST(last + 1, front, 0);
END
$$;

CREATE OR REPLACE FUNCTION relay_job_turn() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.turn := relay_turn_for(NEW.queue, NEW.priority, NEW.grp, NEW.id);
    PERFORM relay_heads_note(NEW.queue, NEW.priority, NEW.grp);
    RETURN NEW;
END
$$;

-- A READY job moved to another queue, priority or group (Relay never
-- does: its updates set none of these; an operator's SQL may). Its old
-- group is noted as one a job left, its new one as one a job entered,
-- with the job's turn given as for a job that becomes READY; the commit
-- then gives both their heads (relay_heads_fix). Without this the new
-- group could be left with no head, and its jobs never claimed.
CREATE OR REPLACE FUNCTION relay_job_move() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.grp IS NOT NULL THEN
        PERFORM relay_heads_note(OLD.queue, OLD.priority, OLD.grp, false);
    END IF;
    IF NEW.grp IS NULL THEN
        NEW.turn := NULL;
    ELSE
        NEW.turn := relay_turn_for(NEW.queue, NEW.priority, NEW.grp, NEW.id);
        PERFORM relay_heads_note(NEW.queue, NEW.priority, NEW.grp);
    END IF;
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_group_move ON relay_jobs;
CREATE TRIGGER relay_jobs_group_move BEFORE UPDATE OF queue, priority, grp ON relay_jobs FOR EACH ROW
    WHEN (OLD.state = 'READY' AND NEW.state = 'READY'
          AND (OLD.queue, OLD.priority, OLD.grp) IS DISTINCT FROM (NEW.queue, NEW.priority, NEW.grp))
    EXECUTE FUNCTION relay_job_move();
