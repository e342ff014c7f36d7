-- An event key's transaction lock (issue 40): a wait for the event and
-- its emit each take it before they read the event's mark, so that of two
-- transactions the second sees what the first committed (a waiter the
-- emit must wake, or the event the wait must return). Held to the commit.
-- The call is in FROM, so the statement returns a row of a type a
-- pooler's wrapping function can return (the function returns void).
SELECT 1::INT AS locked FROM pg_advisory_xact_lock(hashtextextended($1, 40))
