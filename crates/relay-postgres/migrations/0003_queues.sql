-- Relay schema for PostgreSQL, version 3: what is kept about a queue itself.
-- A queue with no row has the defaults (not paused); queues need no
-- declaration.
CREATE TABLE relay_queues (
    name       TEXT    PRIMARY KEY,
    paused     BOOLEAN NOT NULL, -- no job of the queue is leased while true
    updated_at BIGINT  NOT NULL
);
