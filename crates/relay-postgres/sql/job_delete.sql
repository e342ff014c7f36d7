DELETE FROM relay_jobs WHERE id = $1
