-- When job $1's lease expires: how many times it expired before, since it
-- was submitted or last retried (the engine's "expired" events after its
-- last "retried" one), and its queue's own poison_after (NULL: the
-- engine's). A user's own events may take any kind: the engine's are told
-- by their data (as serde_json writes it, keys sorted), which a user's
-- would have to copy on purpose. The job's own events only (their primary
-- key's prefix), and its queue's row by primary key, read without a lock
-- (a claim locks limited queues in name order; this never waits on one).
SELECT (SELECT count(*) FROM relay_job_events
        WHERE job_id = $1 AND kind = 'expired' AND data LIKE '%"error":"lease expired"%'
          AND seq > (SELECT COALESCE(MAX(seq), 0) FROM relay_job_events
                     WHERE job_id = $1 AND kind = 'retried' AND data LIKE '{"from":"%')),
       (SELECT q.poison_after FROM relay_jobs j JOIN relay_queues q ON q.name = j.queue WHERE j.id = $1)
