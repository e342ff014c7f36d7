-- Fields of an existing job besides its status, each kept when NULL: a
-- debounced submit's payload, a lease holder's progress and recorded steps
-- (its guarded status update is in the same batch).
UPDATE jobs SET payload = coalesce(?2, payload), progress = coalesce(?3, progress), steps = coalesce(?4, steps)
WHERE id = ?1
