-- Pruned jobs ($1 ids, $2 the finished_at each had when the prune read
-- it): deleted while still finished at that time (a job retried since is
-- left), with their events and the dependency edges from them. The counts
-- follow by trigger. Answers how many.
WITH gone AS (
    DELETE FROM relay_jobs AS j
    USING unnest($1::BIGINT[], $2::BIGINT[]) AS p (id, finished_at)
    WHERE j.id = p.id AND j.finished_at = p.finished_at AND j.state IN ('SUCCEEDED', 'DEAD', 'CANCELLED')
    RETURNING j.id
), events AS (
    DELETE FROM relay_job_events WHERE job_id IN (SELECT id FROM gone)
), deps AS (
    DELETE FROM relay_job_deps WHERE parent IN (SELECT id FROM gone)
)
SELECT COUNT(*) FROM gone
