-- Forgets up to $2 marks that expired at or before $1, oldest first;
-- answers how many.
WITH old AS (
    DELETE FROM relay_marks WHERE key IN (
        SELECT key FROM relay_marks WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2 FOR UPDATE SKIP LOCKED
    )
    RETURNING 1
)
SELECT COUNT(*) FROM old
