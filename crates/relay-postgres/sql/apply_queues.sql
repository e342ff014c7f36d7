-- A batch's queue settings, each written whole (inserted, or replacing the
-- row, which the batch holds locked), in one statement; the count is checked
-- as every write's is.
WITH w AS (
    INSERT INTO relay_queues (name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, updated_at,
                              poison_after, keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group)
    SELECT * FROM unnest($1::TEXT[], $2::BOOLEAN[], $3::BIGINT[], $4::BIGINT[], $5::BIGINT[], $6::BIGINT[],
                         $7::BIGINT[], $8::BIGINT[], $9::BIGINT[], $10::BIGINT[], $11::BIGINT[], $12::BIGINT[],
                         $14::BIGINT[])
    ON CONFLICT (name) DO UPDATE SET
        paused = excluded.paused, max_leased = excluded.max_leased, rate_limit = excluded.rate_limit,
        rate_per_ms = excluded.rate_per_ms, window_start = excluded.window_start,
        window_count = excluded.window_count, updated_at = excluded.updated_at,
        poison_after = excluded.poison_after, keep_succeeded = excluded.keep_succeeded,
        keep_dead = excluded.keep_dead, keep_cancelled = excluded.keep_cancelled,
        max_leased_per_group = excluded.max_leased_per_group
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $13, 'queue settings') FROM w
