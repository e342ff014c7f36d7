-- How many of one queue's jobs of each of the groups $3 hold a lease that
-- has not expired at $2, for its max_leased_per_group: a seek of
-- relay_jobs_group_leased per group, so the cost is those groups' leases,
-- never the queue's other groups (issue 39). Read by a claim for the
-- groups it meets, once the queue's row is locked (the batch's first
-- flight locks it). The SQLite store's job_group_leased.sql does the same.
SELECT grp, count(*) FROM relay_jobs
WHERE state = 'LEASED' AND grp IS NOT NULL AND queue = $1 AND grp = ANY($3::TEXT[])
  AND lease_expires_at > $2
GROUP BY grp
