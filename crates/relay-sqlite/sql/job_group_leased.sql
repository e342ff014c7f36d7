-- How many of a queue's jobs of each of the groups ?3 (a JSON array of
-- names, without repeats) hold a lease that has not expired, for its
-- max_leased_per_group: a seek of jobs_group_leased per group, so the
-- cost is those groups' leases, never the queue's other groups (issue
-- 39). The PostgreSQL store's job_group_leased.sql does the same. `+?N`:
-- bare, SQLite re-prepared it on every run (tests/plan.rs). CROSS JOIN:
-- the names drive the loop; a plain JOIN let SQLite walk the queue's
-- leases and probe the names, every lease a read.
SELECT j.grp, count(*)
FROM json_each(?3) AS g
CROSS JOIN jobs AS j INDEXED BY jobs_group_leased
WHERE j.state = 'LEASED' AND j.grp IS NOT NULL AND j.queue = +?1 AND j.grp = g.value
  AND j.lease_expires_at > +?2
GROUP BY j.grp
