-- The jobs waiting for the jobs of ?1 (a JSON array of ids): one statement
-- for a whole batch, a range of the primary key per id.
SELECT d.parent, d.child, d.on_failure
FROM json_each(?1) AS p
JOIN job_deps AS d ON d.parent = p.value
