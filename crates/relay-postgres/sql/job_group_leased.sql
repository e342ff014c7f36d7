-- How many of one queue's jobs of each group hold a lease that has not
-- expired at $2, whatever the queue's stored settings say (a limit set
-- earlier in this batch is not written yet): a range of the lease index.
-- The claim's first flight reads queue_group_leased.sql instead.
SELECT grp, count(*) FROM relay_jobs
WHERE state = 'LEASED' AND lease_expires_at > $2 AND queue = $1 AND grp IS NOT NULL
GROUP BY grp
