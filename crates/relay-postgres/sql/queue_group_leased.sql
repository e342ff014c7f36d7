-- How many of each group's jobs hold a lease that has not expired at $2,
-- in the queues of $1 with a max_leased_per_group (read once their rows
-- are locked, as queue_leased_counts.sql): a range of the lease index,
-- every unexpired lease, never the queues' depth or number of groups.
SELECT j.queue, j.grp, count(*)
FROM relay_jobs j
WHERE j.state = 'LEASED' AND j.lease_expires_at > $2 AND j.grp IS NOT NULL AND j.queue = ANY($1::TEXT[])
  AND EXISTS (SELECT 1 FROM relay_queues q WHERE q.name = j.queue AND q.max_leased_per_group IS NOT NULL)
GROUP BY j.queue, j.grp
