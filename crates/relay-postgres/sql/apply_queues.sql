-- A batch's queue settings, each written whole (inserted, or replacing the
-- row), in one statement; the count is checked as every write's is.
WITH w AS (
    INSERT INTO relay_queues (name, paused, updated_at)
    SELECT * FROM unnest($1::TEXT[], $2::BOOLEAN[], $3::BIGINT[])
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $4, 'queue settings') FROM w
