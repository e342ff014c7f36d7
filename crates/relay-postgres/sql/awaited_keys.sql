-- The keys WAITING jobs wait for now, after $1 in the database's order of
-- text (relay_waits_key's), at most $2: each key's waiters, its first
-- waiter and its soonest end. A wait's row outlives a wait that ended
-- without its event (a cancel, a timeout): it counts while its job is
-- WAITING until its time. Joins ('#join:<id>') are left out.
SELECT w.key, count(*), min(w.job_id), min(w.until)
FROM relay_waits AS w JOIN relay_jobs AS j ON j.id = w.job_id
WHERE w.key > $1::TEXT AND w.key NOT LIKE '#%' AND j.state = 'WAITING' AND j.ready_at = w.until
GROUP BY w.key
ORDER BY w.key
LIMIT $2::BIGINT
