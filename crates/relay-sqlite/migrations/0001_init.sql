-- Relay schema, version 1.
-- Times are milliseconds since the Unix epoch. States are stored by name in
-- capitals; rows are decoded strictly (see src/decode.rs), so a hand-edited
-- row that breaks an invariant is reported as corrupt, never guessed at.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT, -- never reused, even after delete
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    payload          BLOB    NOT NULL,
    priority         INTEGER NOT NULL,                  -- 0-3, 3 most urgent
    state            TEXT    NOT NULL,                  -- READY LEASED SUCCEEDED DEAD CANCELLED
    attempts         INTEGER NOT NULL,
    max_attempts     INTEGER NOT NULL,
    ready_at         INTEGER NOT NULL,                  -- not leased before
    created_at       INTEGER NOT NULL,
    finished_at      INTEGER,
    unique_key       TEXT,
    result           BLOB,
    lease_token      INTEGER NOT NULL,                  -- latest token issued; 0 = never leased
    lease_expires_at INTEGER,                           -- set exactly while LEASED
    leased_by        TEXT,                              -- set exactly while LEASED
    last_error       TEXT
);

-- The claim: the oldest due job of each priority class in four probes.
CREATE INDEX jobs_ready ON jobs (queue, priority, ready_at, id) WHERE state = 'READY';

-- The reaper: expired leases in expiry order.
CREATE INDEX jobs_lease_expiry ON jobs (lease_expires_at) WHERE state = 'LEASED';

-- At most one unfinished job per unique key.
CREATE UNIQUE INDEX jobs_active_key ON jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'LEASED');

CREATE TABLE job_events (
    job_id INTEGER NOT NULL,
    seq    INTEGER NOT NULL, -- 1, 2, 3... per job
    at     INTEGER NOT NULL,
    kind   TEXT    NOT NULL,
    data   TEXT    NOT NULL, -- JSON
    PRIMARY KEY (job_id, seq)
) WITHOUT ROWID;
