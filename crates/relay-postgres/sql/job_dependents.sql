-- The edges from jobs $1 to the jobs waiting for them: a range of the primary
-- key per parent, whatever the size of the graph. Sent after the statement
-- that locks the parents' rows: an edge to a parent is committed by the batch
-- that locked that parent unfinished, so it is seen here.
SELECT parent, child, on_failure FROM relay_job_deps
WHERE parent = ANY($1::BIGINT[])
