-- Fields of existing jobs besides their status, each kept when NULL: a
-- debounced submit's payload, a lease holder's progress and recorded steps
-- (their guarded status updates are in the same batch); the count is
-- checked as every write's is.
WITH w AS (
    UPDATE relay_jobs j SET payload = coalesce(u.payload, j.payload), progress = coalesce(u.progress, j.progress),
                            steps = coalesce(u.steps, j.steps)
    FROM unnest($1::BIGINT[], $2::BYTEA[], $3::TEXT[], $4::BYTEA[]) AS u(id, payload, progress, steps)
    WHERE j.id = u.id
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $5, 'job fields') FROM w
