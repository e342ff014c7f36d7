-- The statuses of the jobs a batch acts on, in one round trip. Locks the rows
-- for the rest of the batch's transaction (in id order, the same in every
-- process, so two batches never wait on each other in a cycle here; with
-- SKIP LOCKED turned off, a claim or reap waiting on rows in another order
-- can meet this lock in a cycle: PostgreSQL ends it as a deadlock, which
-- the writer plans again): the batch's guarded writes then always find
-- what it read.
SELECT id, state, attempts, max_attempts, ready_at, finished_at, lease_token, lease_expires_at, leased_by,
       last_error, priority, waiting_on
FROM relay_jobs WHERE id = ANY($1::BIGINT[])
ORDER BY id
FOR UPDATE
