-- Relay schema, version 5: tags, and the indexes search and bulk actions
-- use (the dashboard).

-- A few short labels per job, given at submit and never changed: a JSON
-- array of strings, NULL for none.
ALTER TABLE jobs ADD COLUMN tags TEXT;

-- Jobs by tag, newest first: kept by triggers, so that every path that
-- inserts or deletes a job (submit, delete, prune) keeps it right, and a job
-- without tags costs one WHEN test.
CREATE TABLE job_tags (
    tag    TEXT    NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (tag, job_id)
) WITHOUT ROWID;

CREATE TRIGGER job_tags_insert AFTER INSERT ON jobs WHEN NEW.tags IS NOT NULL
BEGIN
    INSERT OR IGNORE INTO job_tags (tag, job_id) SELECT value, NEW.id FROM json_each(NEW.tags);
END;

CREATE TRIGGER job_tags_delete AFTER DELETE ON jobs WHEN OLD.tags IS NOT NULL
BEGIN
    DELETE FROM job_tags WHERE job_id = OLD.id AND tag IN (SELECT value FROM json_each(OLD.tags));
END;

-- Failed jobs by queue (search by state, the dead jobs page, bulk retry):
-- only a job that ends DEAD or CANCELLED, or is retried from there, touches
-- it; the hot path (READY, LEASED, SUCCEEDED) never does.
CREATE INDEX jobs_failed ON jobs (queue, state, id) WHERE state IN ('DEAD', 'CANCELLED');
