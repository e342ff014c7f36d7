-- A schedule removed (the batch holds its row locked: it is there).
WITH w AS (DELETE FROM relay_schedules WHERE name = $1 RETURNING 1)
SELECT relay_expect(COUNT(*), 1, 'schedule deletion') FROM w
