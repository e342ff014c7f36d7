-- Relay schema, version 22: the unexpired leases of a queue's groups, by
-- group. A claim under a max_leased_per_group reads the counts of the
-- groups it meets (sql/job_group_leased.sql), a seek per group; before,
-- each batch read every leased group's count (queue_group_leased.sql), so
-- 100,000 leased groups cost every batch 100,000 index entries (issue
-- 39). Only grouped LEASED rows are in it: queues without groups pay
-- nothing on a lease or an ack. The SQLite store's 0016 does the same.
CREATE INDEX IF NOT EXISTS relay_jobs_group_leased ON relay_jobs (queue, grp, lease_expires_at)
WHERE state = 'LEASED' AND grp IS NOT NULL;
