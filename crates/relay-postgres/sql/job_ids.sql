-- Ids for new jobs, drawn from the table's own sequence (never handed out
-- twice, by any process); the writer keeps a few in hand between batches.
SELECT nextval(pg_get_serial_sequence('relay_jobs', 'id')) FROM generate_series(1, $1::BIGINT)
