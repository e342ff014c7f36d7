-- Relay schema, version 20: a schedule's jobs may carry a group, and a
-- READY job moved to another group or class keeps both lines headed.
ALTER TABLE relay_schedules ADD COLUMN IF NOT EXISTS grp TEXT;

-- A READY job moved to another queue, priority or group (Relay never
-- does: its updates set none of these; an operator's SQL may). Its old
-- group is noted as one a job left, its new one as one a job entered,
-- with the job's turn given as for a job that becomes READY; the commit
-- then gives both their heads (relay_heads_fix). Without this the new
-- group could be left with no head, and its jobs never claimed.
CREATE OR REPLACE FUNCTION relay_job_move() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    last BIGINT;
    front BIGINT;
BEGIN
    IF OLD.grp IS NOT NULL THEN
        PERFORM relay_heads_note(OLD.queue, OLD.priority, OLD.grp, false);
    END IF;
    IF NEW.grp IS NULL THEN
        NEW.turn := NULL;
        RETURN NEW;
    END IF;
    SELECT turn INTO last FROM relay_jobs
    WHERE state = 'READY' AND grp IS NOT NULL AND queue = NEW.queue AND priority = NEW.priority
      AND grp = NEW.grp AND id <> NEW.id
    ORDER BY turn DESC, id DESC LIMIT 1;
    SELECT turn INTO front FROM relay_group_heads
    WHERE queue = NEW.queue AND priority = NEW.priority
    ORDER BY turn, job LIMIT 1;
    NEW.turn := GREATEST(last + 1, front, 0);
    PERFORM relay_heads_note(NEW.queue, NEW.priority, NEW.grp);
    RETURN NEW;
END
$$;
DROP TRIGGER IF EXISTS relay_jobs_group_move ON relay_jobs;
CREATE TRIGGER relay_jobs_group_move BEFORE UPDATE OF queue, priority, grp ON relay_jobs FOR EACH ROW
    WHEN (OLD.state = 'READY' AND NEW.state = 'READY'
          AND (OLD.queue, OLD.priority, OLD.grp) IS DISTINCT FROM (NEW.queue, NEW.priority, NEW.grp))
    EXECUTE FUNCTION relay_job_move();
