-- The edges from a job whose dependents have been told it finished (or
-- which is deleted): they are spent.
DELETE FROM job_deps WHERE parent = ?1
