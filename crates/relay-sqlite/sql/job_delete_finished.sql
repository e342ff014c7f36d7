-- One pruned job: deleted while it is still finished at the time the
-- prune read (a job retried since is left); answers its queue and state,
-- for the counts, and its tags (job_tags_delete.sql; on other
-- connections a trigger, 0005_tags.sql).
DELETE FROM jobs WHERE id = ?1 AND finished_at = ?2 AND state IN ('SUCCEEDED', 'DEAD', 'CANCELLED')
RETURNING queue, state, tags
