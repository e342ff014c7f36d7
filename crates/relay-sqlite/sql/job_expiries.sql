-- How many times job ?1's lease expired since it was submitted or last
-- retried: the engine's "expired" events after its last "retried" one. A
-- user's own events may take any kind: the engine's are told by their data
-- (as serde_json writes it, keys sorted), which a user's would have to copy
-- on purpose. Read when a lease expires, to tell a poison pill; the job's
-- own events only (its primary key's prefix).
SELECT count(*) FROM job_events
WHERE job_id = ?1 AND kind = 'expired' AND data LIKE '%"error":"lease expired"%'
  AND seq > (SELECT COALESCE(MAX(seq), 0) FROM job_events
             WHERE job_id = ?1 AND kind = 'retried' AND data LIKE '{"from":"%')
