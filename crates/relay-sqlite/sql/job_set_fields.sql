-- Fields of an existing job besides its status, each kept when NULL: a
-- debounced submit's payload, a lease holder's progress (its guarded status
-- update is in the same batch).
UPDATE jobs SET payload = coalesce(?2, payload), progress = coalesce(?3, progress) WHERE id = ?1
