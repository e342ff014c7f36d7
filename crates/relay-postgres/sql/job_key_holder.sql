-- The job's unique key and the other unfinished job that holds it now, if
-- any: a retry of a finished job must not take a key another job holds.
SELECT j.unique_key, o.id
FROM relay_jobs j
JOIN relay_jobs o ON o.unique_key = j.unique_key AND o.state IN ('READY', 'LEASED') AND o.id <> j.id
WHERE j.id = $1
