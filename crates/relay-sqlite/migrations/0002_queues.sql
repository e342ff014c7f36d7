-- Relay schema, version 2: what is kept about a queue itself. A queue with
-- no row has the defaults (not paused, no limits); queues need no
-- declaration.
CREATE TABLE queues (
    name         TEXT    PRIMARY KEY,
    paused       INTEGER NOT NULL, -- 0 or 1: no job of the queue is leased while 1
    max_leased   INTEGER,          -- at most this many LEASED at once; NULL: no limit
    rate_limit   INTEGER,          -- at most rate_limit leases per rate_per_ms;
    rate_per_ms  INTEGER,          --   both NULL: no rate limit
    window_start INTEGER NOT NULL, -- the rate limit's current window (ms)
    window_count INTEGER NOT NULL, --   and the leases taken in it
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;
