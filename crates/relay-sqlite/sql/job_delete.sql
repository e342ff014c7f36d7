-- A job's row; answers its queue and state, for the counts, and what its
-- group's head and its tags need (see job_head_pass.sql,
-- job_tags_delete.sql).
DELETE FROM jobs WHERE id = ?1 RETURNING queue, state, priority, grp, head, tags
