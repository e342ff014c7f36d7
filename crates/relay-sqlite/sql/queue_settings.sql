-- One queue's settings (no row: the defaults). Read with every claim of the
-- queue: a primary-key lookup in a table of a few rows.
SELECT name, paused FROM queues WHERE name = ?1
