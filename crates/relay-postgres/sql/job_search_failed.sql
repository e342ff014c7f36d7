-- job_search.sql for DEAD or CANCELLED jobs ($2, one of those): reads the
-- partial index of failed jobs (migration 0007), which only failures and
-- their retries write, so the search costs the failed jobs, not the table.
SELECT id FROM relay_jobs
WHERE state IN ('DEAD', 'CANCELLED')
  AND id < coalesce($8::BIGINT, 9223372036854775807)
  AND ($1::TEXT IS NULL OR queue = $1) AND ($2::TEXT IS NULL OR state = $2) AND ($3::TEXT IS NULL OR kind = $3)
  AND ($5::BIGINT IS NULL OR created_at >= $5) AND ($6::BIGINT IS NULL OR created_at < $6)
  AND ($7::TEXT IS NULL OR strpos(last_error, $7) > 0)
  AND ($4::TEXT IS NULL OR tags @> ARRAY[$4::TEXT])
ORDER BY id DESC
LIMIT $9
