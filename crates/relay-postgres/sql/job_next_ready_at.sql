SELECT MIN(ready_at) FROM relay_jobs WHERE state IN ('READY', 'SCHEDULED', 'RETRYING') AND queue = $1 AND ready_at > $2
