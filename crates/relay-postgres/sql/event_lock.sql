-- An event key's transaction lock (issue 40): a wait for the event and
-- its emit each take it before they read the event's mark, so that of two
-- transactions the second sees what the first committed (a waiter the
-- emit must wake, or the event the wait must return). Held to the commit.
SELECT pg_advisory_xact_lock(hashtextextended($1, 40))
