-- The jobs waiting for job ?1: a range of the primary key.
SELECT parent, child, on_failure FROM job_deps WHERE parent = ?1
