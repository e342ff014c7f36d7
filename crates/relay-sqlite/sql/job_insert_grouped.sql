-- job_insert.sql for a job with a group: the same columns, and its turn
-- when it is inserted READY (migrations/0013_groups.sql: one after its
-- group's last READY job of its class, never before the class's front) and
-- whether it heads its group's line (migrations/0014_group_heads.sql: the
-- group had no READY job of its class), computed here so that the row is
-- written once (the insert trigger, for rows
-- written without a turn, would write it again). Parameters in the reads
-- are written `+?N`, as in job_ready_heads.sql: bare, SQLite re-prepared
-- the statement on every run (submits with groups measured 0.22x).
INSERT INTO jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                  finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error,
                  lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp, turn, head)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23,
        CASE WHEN ?6 = 'READY' THEN max(
            coalesce((SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                      WHERE state = 'READY' AND grp IS NOT NULL AND queue = +?2 AND priority = +?5
                        AND grp = +?23), 0),
            coalesce((SELECT turn FROM jobs INDEXED BY jobs_fair
                      WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = +?2 AND priority = +?5
                      ORDER BY turn, id LIMIT 1), 0))
        END,
        ?6 = 'READY' AND NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_group_turn
                                     WHERE state = 'READY' AND grp IS NOT NULL AND queue = +?2 AND priority = +?5
                                       AND grp = +?23))
