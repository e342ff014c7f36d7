-- Relay schema, version 5: tags, and the indexes search and bulk actions
-- use (the dashboard).

-- A few short labels per job, given at submit and never changed: a JSON
-- array of strings, NULL for none.
ALTER TABLE jobs ADD COLUMN tags TEXT;

-- Jobs by tag, newest first. The writer inserts a job's rows with the job
-- (only for a job that has tags: an AFTER INSERT trigger cost every submit
-- about 4%, measured); a trigger deletes them with the job, whichever path
-- deletes it (delete, prune), off the hot path.
CREATE TABLE job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;

CREATE TRIGGER job_tags_delete AFTER DELETE ON jobs WHEN OLD.tags IS NOT NULL
BEGIN
    DELETE FROM job_tags WHERE job_id = OLD.id AND tag IN (SELECT value FROM json_each(OLD.tags));
END;

-- Failed jobs by queue (search by state, the dead jobs page, bulk retry):
-- only a job that ends DEAD or CANCELLED, or is retried from there, touches
-- it; the hot path (READY, LEASED, SUCCEEDED) never does.
CREATE INDEX jobs_failed ON jobs (queue, state, id) WHERE state IN ('DEAD', 'CANCELLED');
