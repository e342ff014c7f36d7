-- Relay schema for PostgreSQL, version 3: a job's own lease length and
-- timeout, what is kept about a queue itself, and periodic jobs. A queue
-- with no row has the defaults (not paused, no limits); queues need no
-- declaration.

-- A job's own lease length and the worker's timeout for it (NULL: the
-- lease request's, the worker's per-kind).
ALTER TABLE relay_jobs ADD COLUMN lease_for_ms BIGINT, ADD COLUMN timeout_ms BIGINT;

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

-- Periodic jobs: each tick of a schedule enqueues one job from its template,
-- in the same transaction that moves next_at past the tick; the scheduler
-- locks due rows with SKIP LOCKED, so each tick is taken by one process.
CREATE TABLE relay_schedules (
    name         TEXT    PRIMARY KEY,
    cron         TEXT,             -- a cron expression, or
    every_ms     BIGINT,           --   an interval: exactly one of the two
    tz           TEXT,             -- the cron's IANA time zone; NULL: UTC
    queue        TEXT    NOT NULL, -- the job template:
    kind         TEXT    NOT NULL,
    payload      BYTEA   NOT NULL,
    priority     BIGINT  NOT NULL,
    max_attempts BIGINT  NOT NULL,
    paused       BOOLEAN NOT NULL,
    created_at   BIGINT  NOT NULL, -- an interval's ticks count from here
    next_at      BIGINT  NOT NULL, -- the next tick
    last_at      BIGINT            -- the tick of the latest job enqueued
);
CREATE INDEX relay_schedules_due ON relay_schedules (next_at) WHERE NOT paused;
