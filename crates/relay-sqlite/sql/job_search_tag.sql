-- job_search.sql for a filter with a tag (?4): walks that tag's entries of
-- job_tags from the cursor down, so a rare tag costs its own jobs.
SELECT t.job_id FROM job_tags AS t JOIN jobs AS j ON j.id = t.job_id
WHERE t.tag = ?4 AND t.job_id < coalesce(?8, 9223372036854775807)
  AND (?1 IS NULL OR j.queue = ?1) AND (?2 IS NULL OR j.state = ?2) AND (?3 IS NULL OR j.kind = ?3)
  AND (?5 IS NULL OR j.created_at >= ?5) AND (?6 IS NULL OR j.created_at < ?6)
  AND (?7 IS NULL OR instr(j.last_error, ?7) > 0)
ORDER BY t.job_id DESC
LIMIT ?9
