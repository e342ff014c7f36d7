-- Relay schema for PostgreSQL, version 3: what is kept about a queue itself.
-- A queue with no row has the defaults (not paused, no limits); queues need
-- no declaration.
CREATE TABLE relay_queues (
    name         TEXT    PRIMARY KEY,
    paused       BOOLEAN NOT NULL, -- no job of the queue is leased while true
    max_leased   BIGINT,           -- at most this many LEASED at once; NULL: no limit
    rate_limit   BIGINT,           -- at most rate_limit leases per rate_per_ms;
    rate_per_ms  BIGINT,           --   both NULL: no rate limit
    window_start BIGINT  NOT NULL, -- the rate limit's current window (ms)
    window_count BIGINT  NOT NULL, --   and the leases taken in it
    updated_at   BIGINT  NOT NULL
);
