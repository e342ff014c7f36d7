-- Relay schema, version 2: what is kept about a queue itself. A queue with
-- no row has the defaults (not paused); queues need no declaration.
CREATE TABLE queues (
    name       TEXT    PRIMARY KEY,
    paused     INTEGER NOT NULL, -- 0 or 1: no job of the queue is leased while 1
    updated_at INTEGER NOT NULL
) WITHOUT ROWID;
