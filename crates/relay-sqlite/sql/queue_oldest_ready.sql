-- The earliest ready_at of each queue with jobs waiting to be leased
-- (READY, SCHEDULED, RETRYING: a count row each, hence DISTINCT) named from
-- ?1 to ?2:
-- for each priority class, the first entry of jobs_ready (an index seek,
-- not a walk over the ready jobs), and the first of jobs_group_wait (the
-- grouped jobs), the smallest of the five. Due jobs exist
-- exactly when it is not in the future, and it is then the oldest of them.
SELECT c.queue,
       (SELECT MIN(m) FROM (
            SELECT (SELECT MIN(ready_at) FROM jobs INDEXED BY jobs_ready
                    WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NULL AND queue = c.queue
                      AND priority = p.value) AS m
            FROM json_each('[0,1,2,3]') AS p
            UNION ALL
            SELECT (SELECT MIN(ready_at) FROM jobs INDEXED BY jobs_group_wait
                    WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND grp IS NOT NULL AND queue = c.queue)))
FROM (SELECT DISTINCT queue FROM job_counts
      WHERE state BETWEEN 'READY' AND 'SCHEDULED' AND n > 0 AND queue BETWEEN ?1 AND ?2) AS c
