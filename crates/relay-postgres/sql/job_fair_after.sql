-- The next page of one class of a queue's group heads after (turn, id) =
-- ($3, $4), each group's row its first READY job this transaction can
-- lock, as in job_ready.sql. Columns as job_ready.sql.
SELECT x.*, g.turn AS head_turn, g.job AS head_id, g.grp AS head_grp, $2::BIGINT AS head_priority
FROM (SELECT turn, job, grp FROM relay_group_heads
      WHERE queue = $1 AND priority = $2 AND (turn, job) > ($3, $4)
      ORDER BY turn, job
      LIMIT $5) AS g
LEFT JOIN LATERAL (
    SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
               state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps, turn
    FROM relay_jobs j
    WHERE j.state = 'READY' AND j.grp IS NOT NULL AND j.queue = $1 AND j.priority = $2 AND j.grp = g.grp
    ORDER BY j.turn, j.id
    LIMIT 1
    FOR UPDATE SKIP LOCKED
) AS x ON true
ORDER BY g.turn, g.job
