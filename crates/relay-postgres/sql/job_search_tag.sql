-- job_search.sql for a filter with a tag ($4): the GIN index of tagged jobs
-- finds that tag's jobs, so a rare tag costs its own jobs.
SELECT id FROM relay_jobs
WHERE tags @> ARRAY[$4::TEXT] AND tags IS NOT NULL
  AND id < coalesce($8::BIGINT, 9223372036854775807)
  AND ($1::TEXT IS NULL OR queue = $1) AND ($2::TEXT IS NULL OR state = $2) AND ($3::TEXT IS NULL OR kind = $3)
  AND ($5::BIGINT IS NULL OR created_at >= $5) AND ($6::BIGINT IS NULL OR created_at < $6)
  AND ($7::TEXT IS NULL OR strpos(last_error, $7) > 0)
ORDER BY id DESC
LIMIT $9
