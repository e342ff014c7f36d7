SELECT id FROM relay_jobs WHERE unique_key = $1 AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING')
