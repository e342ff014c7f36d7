-- An event emitted inside the caller's own transaction (issue 40): the
-- function of migrations/functions.sql, with its checks, the wake-ups of
-- the key's waiters and the NOTIFY delivered at the caller's commit.
SELECT first, woken FROM relay_emit($1, $2)
