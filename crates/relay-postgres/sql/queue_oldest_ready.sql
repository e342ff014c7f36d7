-- The earliest ready_at of each queue with jobs waiting to be leased named from $1 to $2:
-- for each priority class, the first entry of relay_jobs_ready (an index
-- seek, not a walk over the ready jobs), and the first of
-- relay_jobs_group_wait (the grouped jobs), the smallest of the five. Due jobs
-- exist exactly when it is not in the future, and it is then the oldest of
-- them.
SELECT c.queue, MIN(m.ready_at)
FROM (SELECT queue FROM relay_job_counts
      WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND queue COLLATE "C" BETWEEN $1 AND $2
      GROUP BY queue HAVING SUM(n) > 0) AS c
CROSS JOIN generate_series(0, 4) AS p(priority)
CROSS JOIN LATERAL (
    SELECT ready_at FROM relay_jobs
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NULL AND queue = c.queue AND priority = p.priority
    UNION ALL
    -- "class" 4: the grouped jobs, by relay_jobs_group_wait
    SELECT ready_at FROM relay_jobs
    WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND grp IS NOT NULL AND queue = c.queue AND p.priority = 4
    ORDER BY ready_at LIMIT 1
) AS m
GROUP BY c.queue
