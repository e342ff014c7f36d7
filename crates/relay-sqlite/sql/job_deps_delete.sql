-- The edges from a deleted job (its dependents were settled when it
-- finished, or when it was deleted unfinished).
DELETE FROM job_deps WHERE parent = ?1
