-- SCHEDULED and RETRYING jobs whose time has come but that no writer has
-- promoted yet (none has run since: a file only read, a server stopped),
-- by queue and state: stats count them READY. Only the ?2 earliest
-- (jobs_due), so a read costs at most that many rows; with any writer
-- running there are none.
SELECT queue, state, COUNT(*) FROM (
    SELECT queue, state FROM jobs
    WHERE state BETWEEN 'RETRYING' AND 'SCHEDULED' AND ready_at <= ?1
    ORDER BY ready_at LIMIT ?2
)
GROUP BY queue, state
