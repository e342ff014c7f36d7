-- For each claimed queue of $1 with a max_leased_per_group: the groups of
-- its first $3 heads of each class (the groups the batch's first page of
-- candidates holds, sql/job_ready.sql) and how many of each one's jobs
-- hold a lease that has not expired at $2. A statement of its own in the
-- batch's first flight, after queue_settings_limited.sql has locked the
-- queues' rows, as queue_leased_counts.sql: every lease the batches
-- before it committed is seen, and seen before the batch takes its
-- instant (an ack another process commits later is stamped later than
-- the leases this batch makes on the strength of this count). A seek of
-- relay_jobs_group_leased per group: the cost is those groups' leases,
-- never the queue's other groups (issue 39; before, every leased group
-- of the queue was read here). Groups met past the first page are read
-- by job_group_leased.sql.
SELECT q.name, g.grp,
       (SELECT count(*) FROM relay_jobs j
        WHERE j.state = 'LEASED' AND j.grp IS NOT NULL AND j.queue = q.name AND j.grp = g.grp
          AND j.lease_expires_at > $2)
FROM relay_queues q
CROSS JOIN (VALUES (0::BIGINT), (1), (2), (3)) AS p(prio)
CROSS JOIN LATERAL (
    SELECT h.grp FROM relay_group_heads h
    WHERE h.queue = q.name AND h.priority = p.prio
    ORDER BY h.turn, h.job
    LIMIT $3
) AS g
WHERE q.name = ANY($1::TEXT[]) AND q.max_leased_per_group IS NOT NULL
