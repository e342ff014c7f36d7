-- How many of a queue's jobs hold a lease that has not expired at $2 (see
-- queue_leased_counts.sql).
SELECT count(*) FROM relay_jobs WHERE state = 'LEASED' AND lease_expires_at > $2 AND queue = $1
