-- A batch's waits: each job's wait written whole ($1-$4), then the waits
-- it ended deleted ($5).
WITH put AS (
    INSERT INTO relay_waits (job_id, key, step, until)
    SELECT * FROM unnest($1::BIGINT[], $2::TEXT[], $3::TEXT[], $4::BIGINT[])
    ON CONFLICT (job_id) DO UPDATE SET key = excluded.key, step = excluded.step, until = excluded.until
), gone AS (
    DELETE FROM relay_waits WHERE job_id = ANY($5::BIGINT[]) AND NOT (job_id = ANY($1::BIGINT[]))
)
SELECT 1
