-- job_search.sql for DEAD or CANCELLED jobs (?2, one of those): reads the
-- partial index of failed jobs (migration 0005), which only failures and
-- their retries write, so the search costs the failed jobs, not the table.
SELECT id FROM jobs INDEXED BY jobs_failed
WHERE state IN ('DEAD', 'CANCELLED') AND state = ?2
  AND id < coalesce(?8, 9223372036854775807)
  AND (?1 IS NULL OR queue = ?1) AND (?3 IS NULL OR kind = ?3)
  AND (?5 IS NULL OR created_at >= ?5) AND (?6 IS NULL OR created_at < ?6)
  AND (?7 IS NULL OR instr(last_error, ?7) > 0)
  AND (?4 IS NULL OR id IN (SELECT job_id FROM job_tags WHERE tag = ?4))
ORDER BY id DESC
LIMIT ?9
