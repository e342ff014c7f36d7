-- One tag of a new job (job_tags, migration 0005), written with the job.
INSERT OR IGNORE INTO job_tags (tag, job_id) VALUES (?1, ?2)
