SELECT COALESCE((SELECT last_seq FROM relay_jobs WHERE id = $1),
                (SELECT MAX(seq) FROM relay_job_events WHERE job_id = $1), 0)
