-- A job's row; answers its queue and state, for the counts.
DELETE FROM jobs WHERE id = ?1 RETURNING queue, state
