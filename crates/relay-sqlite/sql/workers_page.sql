-- A page of workers, by id: those after ?1 ('' from the first), at most
-- ?2. Columns as decode::worker reads them. A seek of the primary key: a
-- page costs its rows, however many workers there are (issue 39: 100,000
-- workers were one 26 MB answer). The PostgreSQL store's
-- workers_page.sql does the same.
SELECT id, beat, seen_at, stopped_at FROM workers WHERE id > ?1 ORDER BY id LIMIT ?2
