-- How many jobs have an id in (?1, ?2]: the watch's count of the jobs
-- committed since its last look (a walk of the newest ids only).
SELECT COUNT(*) FROM jobs WHERE id > ?1 AND id <= ?2
