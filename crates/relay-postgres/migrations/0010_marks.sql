-- Relay schema, version 10: marks, a value kept under a key until it
-- expires: the job an idempotency key named (`idempotency:<key>`), a
-- dashboard session that was logged out (`session-ended:<nonce>`). Written
-- in the batch's own transaction (sql/apply_marks.sql); expired ones are
-- pruned (sql/mark_prune.sql).
CREATE TABLE relay_marks (
    key        TEXT   NOT NULL PRIMARY KEY,
    value      TEXT   NOT NULL,
    expires_at BIGINT NOT NULL  -- Unix milliseconds
);
CREATE INDEX relay_marks_expiry ON relay_marks (expires_at);
