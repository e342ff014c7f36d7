SELECT id FROM jobs WHERE unique_key = ?1 AND unique_key IS NOT NULL AND state IN ('READY', 'SCHEDULED', 'RETRYING', 'LEASED', 'WAITING')
