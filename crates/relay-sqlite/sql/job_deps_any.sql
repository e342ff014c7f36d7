-- Whether any job waits for another: when none does (a queue that does not
-- use dependencies), a batch reads no edges.
SELECT EXISTS (SELECT 1 FROM job_deps)
