-- For each claimed queue with a max_leased: how many of its jobs hold a
-- lease that has not expired at $2 (the batch reclaims expired ones before
-- it claims). A statement of its own, after queue_settings_limited.sql in
-- the same flight: its snapshot is taken once that statement holds the
-- rows' locks, so it sees every lease the batches before it committed. A
-- range of the partial index of leases (unexpired leases, not the queue's
-- depth).
SELECT q.name,
       (SELECT count(*) FROM relay_jobs j
        WHERE j.state = 'LEASED' AND j.lease_expires_at > $2 AND j.queue = q.name)
FROM relay_queues q
WHERE q.name = ANY($1::TEXT[]) AND q.max_leased IS NOT NULL
