-- Fields of existing jobs besides their status, each kept when NULL: a
-- debounced submit's payload, a lease holder's progress (their guarded
-- status updates are in the same batch); the count is checked as every
-- write's is.
WITH w AS (
    UPDATE relay_jobs j SET payload = coalesce(u.payload, j.payload), progress = coalesce(u.progress, j.progress)
    FROM unnest($1::BIGINT[], $2::BYTEA[], $3::TEXT[]) AS u(id, payload, progress)
    WHERE j.id = u.id
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $4, 'job fields') FROM w
