-- How many of each group's jobs hold a lease that has not expired at $2,
-- in the queues of $1 with a max_leased_per_group (read once their rows
-- are locked, as queue_leased_counts.sql). Driven from the queues' rows,
-- so a batch whose queues set no such limit reads no job; for one that
-- does, a range of the lease index: every unexpired lease, never the
-- queue's depth or its number of groups.
SELECT q.name, g.grp, g.n
FROM relay_queues q
CROSS JOIN LATERAL (
    SELECT j.grp, count(*) AS n FROM relay_jobs j
    WHERE j.state = 'LEASED' AND j.lease_expires_at > $2 AND j.queue = q.name AND j.grp IS NOT NULL
    GROUP BY j.grp
) AS g
WHERE q.name = ANY($1::TEXT[]) AND q.max_leased_per_group IS NOT NULL
