-- Relay schema, version 16: the unexpired leases of a queue's groups, by
-- group. A claim under a max_leased_per_group reads the counts of the
-- groups it meets (sql/job_group_leased.sql), a seek per group; before,
-- it read every leased group's count each batch, so 100,000 leased groups
-- cost every batch 100,000 rows (issue 39). Only grouped LEASED rows are
-- in it: queues without groups pay nothing on a lease or an ack.
CREATE INDEX jobs_group_leased ON jobs (queue, grp, lease_expires_at)
WHERE state = 'LEASED' AND grp IS NOT NULL;
