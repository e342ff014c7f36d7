-- Relay schema, version 2: a job's own lease length and timeout, what is
-- kept about a queue itself, and periodic jobs. A queue with no row has the
-- defaults (not paused, no limits); queues need no declaration.

-- A job's own lease length and the worker's timeout for it (NULL: the
-- lease request's, the worker's per-kind).
ALTER TABLE jobs ADD COLUMN lease_for_ms INTEGER;
ALTER TABLE jobs ADD COLUMN timeout_ms INTEGER;

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

-- Periodic jobs: each tick of a schedule enqueues one job from its template,
-- in the same transaction that moves next_at past the tick (so exactly once,
-- whichever process runs it).
CREATE TABLE schedules (
    name         TEXT    PRIMARY KEY,
    cron         TEXT,             -- a cron expression, or
    every_ms     INTEGER,          --   an interval: exactly one of the two
    tz           TEXT,             -- the cron's IANA time zone; NULL: UTC
    queue        TEXT    NOT NULL, -- the job template:
    kind         TEXT    NOT NULL,
    payload      BLOB    NOT NULL,
    priority     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    paused       INTEGER NOT NULL, -- 0 or 1
    created_at   INTEGER NOT NULL, -- an interval's ticks count from here
    next_at      INTEGER NOT NULL, -- the next tick
    last_at      INTEGER           -- the tick of the latest job enqueued
) WITHOUT ROWID;

-- The scheduler: due schedules in tick order.
CREATE INDEX schedules_due ON schedules (next_at) WHERE paused = 0;
