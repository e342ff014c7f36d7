-- The last job id ever handed out: AUTOINCREMENT keeps it in sqlite_sequence
-- (never below the largest id in the table; both are read in case the
-- sequence row is missing). The writer numbers new jobs after it, under its
-- write lock.
SELECT MAX(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0),
           COALESCE((SELECT MAX(id) FROM jobs), 0))
