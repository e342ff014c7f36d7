-- A batch's new dependency edges, in one statement (each child is a job the
-- batch inserts; its parents' rows are locked by the batch). The count is
-- checked in the statement, as in the other apply_*.sql.
WITH w AS (
    INSERT INTO relay_job_deps (parent, child, on_failure)
    SELECT * FROM unnest($1::BIGINT[], $2::BIGINT[], $3::TEXT[])
    RETURNING 1
)
SELECT relay_expect(COUNT(*), $4, 'dependency edges') FROM w
