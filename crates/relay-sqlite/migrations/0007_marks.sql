-- Relay schema, version 7: marks, a value kept under a key until it
-- expires: the job an idempotency key named (`idempotency:<key>`), a
-- dashboard session that was logged out (`session-ended:<nonce>`). Written
-- by the writer in the batch's own transaction; expired ones are pruned.
CREATE TABLE marks (
    key        TEXT    NOT NULL PRIMARY KEY,
    value      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL  -- Unix milliseconds
) WITHOUT ROWID;
CREATE INDEX marks_expiry ON marks (expires_at);
