-- A job's unique key: what a retry of a finished job must take back.
SELECT unique_key FROM relay_jobs WHERE id = $1
