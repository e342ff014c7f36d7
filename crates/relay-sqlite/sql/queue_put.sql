-- A queue's settings, written whole.
INSERT INTO queues (name, paused, max_leased, rate_limit, rate_per_ms, window_start, window_count, updated_at,
                    poison_after, keep_succeeded, keep_dead, keep_cancelled, max_leased_per_group)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)
ON CONFLICT (name) DO UPDATE SET
    paused = excluded.paused, max_leased = excluded.max_leased, rate_limit = excluded.rate_limit,
    rate_per_ms = excluded.rate_per_ms, window_start = excluded.window_start,
    window_count = excluded.window_count, updated_at = excluded.updated_at,
    poison_after = excluded.poison_after, keep_succeeded = excluded.keep_succeeded,
    keep_dead = excluded.keep_dead, keep_cancelled = excluded.keep_cancelled,
    max_leased_per_group = excluded.max_leased_per_group
