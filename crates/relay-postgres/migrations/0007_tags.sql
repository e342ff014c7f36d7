-- Relay schema for PostgreSQL, version 7: tags, and the indexes search and
-- bulk actions use (the dashboard).

-- A few short labels per job, given at submit and never changed; NULL for
-- none. Found through a GIN index of the jobs that have any.
ALTER TABLE relay_jobs ADD COLUMN tags TEXT[];
CREATE INDEX relay_jobs_tags ON relay_jobs USING gin (tags) WHERE tags IS NOT NULL;

-- Failed jobs by queue (search by state, the dead jobs page, bulk retry):
-- only a job that ends DEAD or CANCELLED, or is retried from there, touches
-- it; the hot path (READY, LEASED, SUCCEEDED) never does.
CREATE INDEX relay_jobs_failed ON relay_jobs (queue, state, id) WHERE state IN ('DEAD', 'CANCELLED');
