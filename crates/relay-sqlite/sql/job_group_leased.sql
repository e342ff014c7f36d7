-- How many of a queue's jobs of each group hold a lease that has not
-- expired, for its max_leased_per_group: a range of the partial index of
-- leases (every unexpired lease, never the queue's depth or its number of
-- groups), as job_leased_count.sql. `+?N`: bare, SQLite re-prepared it on
-- every run (tests/plan.rs).
SELECT grp, count(*) FROM jobs INDEXED BY jobs_lease_expiry
WHERE state = 'LEASED' AND lease_expires_at > +?2 AND queue = +?1 AND grp IS NOT NULL
GROUP BY grp
