-- How many of a queue's jobs hold a lease that has not expired, for its
-- max_leased (a claim reclaims expired leases before it counts). A range of
-- the partial index of leases (every unexpired lease, not the queue's
-- depth); no index of its own, so queues without limits pay nothing on
-- every lease and ack.
SELECT count(*) FROM jobs INDEXED BY jobs_lease_expiry
WHERE state = 'LEASED' AND lease_expires_at > ?2 AND queue = ?1
