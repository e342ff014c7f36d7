-- The lines of groups whose heads the claim took: for each ($3[i], $4[i],
-- $5[i]) = (group, turn, id), up to $6 of the group's next READY jobs of
-- class $2 after (turn, id), in turn order (the claim reads heads only).
-- One seek of relay_jobs_group_turn a group. Locked and columns as
-- job_ready.sql.
SELECT n.*
FROM unnest($3::TEXT[], $4::BIGINT[], $5::BIGINT[]) AS g(grp, turn, id)
CROSS JOIN LATERAL (
    SELECT id, queue, kind, payload, priority, created_at, unique_key, result,
           state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by, last_error, lease_for_ms, timeout_ms, waiting_on, traceparent, tags, progress, grp, steps, turn
    FROM relay_jobs j
    WHERE j.state = 'READY' AND j.grp IS NOT NULL AND j.queue = $1 AND j.priority = $2 AND j.grp = g.grp
      AND (j.turn, j.id) > (g.turn, g.id)
    ORDER BY j.turn, j.id
    LIMIT $6
    FOR UPDATE SKIP LOCKED
) AS n
