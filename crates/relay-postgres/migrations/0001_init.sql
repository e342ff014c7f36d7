-- Relay schema for PostgreSQL, version 1. Times are milliseconds since the
-- Unix epoch (the engine's clock decides them, never the server's NOW()).
CREATE TABLE relay_jobs (
    id               BIGSERIAL PRIMARY KEY,
    queue            TEXT   NOT NULL,
    kind             TEXT   NOT NULL,
    payload          BYTEA  NOT NULL,
    priority         BIGINT NOT NULL,
    state            TEXT   NOT NULL,
    attempts         BIGINT NOT NULL,
    max_attempts     BIGINT NOT NULL,
    ready_at         BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    finished_at      BIGINT,
    unique_key       TEXT,
    result           BYTEA,
    lease_token      BIGINT NOT NULL,
    lease_expires_at BIGINT,
    leased_by        TEXT,
    last_error       TEXT
);
CREATE INDEX relay_jobs_ready ON relay_jobs (queue, priority, ready_at, id) WHERE state = 'READY';
CREATE INDEX relay_jobs_lease_expiry ON relay_jobs (lease_expires_at) WHERE state = 'LEASED';
CREATE UNIQUE INDEX relay_jobs_active_key ON relay_jobs (unique_key)
    WHERE unique_key IS NOT NULL AND state IN ('READY', 'LEASED');
CREATE TABLE relay_job_events (
    job_id BIGINT NOT NULL,
    seq    BIGINT NOT NULL,
    at     BIGINT NOT NULL,
    kind   TEXT   NOT NULL,
    data   TEXT   NOT NULL,
    PRIMARY KEY (job_id, seq)
);
