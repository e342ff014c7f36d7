-- Parameters in this statement are written `+?N`: a bare `?N` here makes
-- SQLite re-prepare the statement each time it is bound after a reset
-- (rusqlite's statement cache clears bindings), measured as most of the
-- writer's CPU. The index is used all the same (tests/plan.rs).
-- The limits are literals, put in from relay_store::REAP_BATCH when the
-- statement is loaded (sql.rs): a bound LIMIT would make SQLite re-prepare
-- the statement on every run.
-- What the reap reclaims or promotes: LEASED jobs whose lease expired, in
-- expiry order (jobs_lease_expiry), then SCHEDULED and RETRYING jobs whose
-- time has come, in order of it (jobs_due), then sleeping jobs (WAITING on
-- no other job) whose time has come (jobs_sleeping).
SELECT * FROM (SELECT id FROM jobs
               WHERE state = 'LEASED' AND lease_expires_at <= +?1
               ORDER BY lease_expires_at LIMIT {REAP_BATCH})
UNION ALL
SELECT * FROM (SELECT id FROM jobs
               WHERE state BETWEEN 'RETRYING' AND 'SCHEDULED' AND ready_at <= +?1
               ORDER BY ready_at LIMIT {REAP_BATCH})
UNION ALL
SELECT * FROM (SELECT id FROM jobs
               WHERE state = 'WAITING' AND waiting_on = 0 AND ready_at <= +?1
               ORDER BY ready_at LIMIT {REAP_BATCH})
