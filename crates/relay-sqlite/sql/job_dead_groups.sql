-- The newest ?2 DEAD jobs (a bounded read however many there are) grouped
-- by queue, kind and the first line of their last error (a traceback's
-- later lines differ from job to job), most jobs first: how many, the
-- newest id and when the newest of them died.
SELECT queue, kind, substr(coalesce(last_error, ''), 1, instr(coalesce(last_error, '') || char(10), char(10)) - 1) AS error,
       COUNT(*), MAX(id), MAX(finished_at)
FROM (SELECT queue, kind, last_error, id, finished_at FROM jobs INDEXED BY jobs_failed
      WHERE state IN ('DEAD', 'CANCELLED') AND state = 'DEAD'
      ORDER BY id DESC LIMIT ?2)
GROUP BY queue, kind, error
ORDER BY COUNT(*) DESC, MAX(id) DESC
LIMIT ?1
