-- A batch's marks, each inserted or replacing an expired mark of its key
-- ($4: the batch's time). A key another batch marked since this one read it
-- absent is not replaced: the count falls short, the transaction aborts
-- and the batch is planned again (it then reads that mark).
WITH w AS (
    INSERT INTO relay_marks (key, value, expires_at)
    SELECT * FROM unnest($1::TEXT[], $2::TEXT[], $3::BIGINT[])
    ON CONFLICT (key) DO UPDATE SET value = excluded.value, expires_at = excluded.expires_at
        WHERE relay_marks.expires_at <= $4
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $5, 'marks') FROM w
