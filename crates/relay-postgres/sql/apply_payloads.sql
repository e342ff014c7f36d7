-- Debounced submits' payloads, replacing existing jobs' (their guarded
-- status updates are in the same batch); the count is checked as every
-- write's is.
WITH w AS (
    UPDATE relay_jobs j SET payload = u.payload
    FROM unnest($1::BIGINT[], $2::BYTEA[]) AS u(id, payload)
    WHERE j.id = u.id
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $3, 'payloads') FROM w
