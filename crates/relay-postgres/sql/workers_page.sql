-- A page of workers, by id: those after $1 ('' from the first), at most
-- $2. Columns as the reader decodes them. A seek of the primary key (in
-- the database's collation: pages follow each other, whatever it is): a
-- page costs its rows, however many workers there are (issue 39). The
-- SQLite store's workers_page.sql does the same.
SELECT id, beat, seen_at, stopped_at FROM relay_workers WHERE id > $1 ORDER BY id LIMIT $2
