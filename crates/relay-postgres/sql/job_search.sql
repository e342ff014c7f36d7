-- The ids of the jobs a filter matches, newest first, one page: ids below $8
-- (the cursor), at most $9. A condition whose parameter is NULL is skipped.
-- $1 queue, $2 state, $3 kind, $4 tag, $5 created at or after, $6 created
-- before, $7 text the last error contains.
-- Walks the primary key from the cursor down, so it is cheap while matches
-- are common; a tag, and the failed states, have paths of their own
-- (job_search_tag.sql, job_search_failed.sql).
SELECT id FROM relay_jobs
WHERE id < coalesce($8::BIGINT, 9223372036854775807)
  AND ($1::TEXT IS NULL OR queue = $1) AND ($2::TEXT IS NULL OR state = $2) AND ($3::TEXT IS NULL OR kind = $3)
  AND ($5::BIGINT IS NULL OR created_at >= $5) AND ($6::BIGINT IS NULL OR created_at < $6)
  AND ($7::TEXT IS NULL OR strpos(last_error, $7) > 0)
  AND ($4::TEXT IS NULL OR tags @> ARRAY[$4::TEXT])
ORDER BY id DESC
LIMIT $9
