-- A deleted job's tags (?2, its JSON array), by the writer's own
-- connection, which runs no triggers: what job_tags_delete does for other
-- programs (migrations/0005_tags.sql).
-- Tags that are not a JSON array (a row edited by hand) delete nothing
-- rather than fail the delete.
DELETE FROM job_tags WHERE job_id = ?1 AND tag IN (SELECT value FROM json_each(iif(json_valid(?2), ?2, '[]')))
