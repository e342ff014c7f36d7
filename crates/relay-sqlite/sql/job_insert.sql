-- A job as its batch left it (a job submitted and leased in one batch is
-- inserted LEASED), under an id the writer reserved (job_ids.sql).
-- No RETURNING (it costs a temporary table per statement).
INSERT INTO jobs (id, queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                  finished_at, unique_key, result, lease_token, lease_expires_at, leased_by, last_error,
                  lease_for_ms, timeout_ms, waiting_on, traceparent, tags, grp)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23)
