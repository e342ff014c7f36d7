-- The last id of the prune's window (the {PRUNE_SCAN} jobs after id ?1) and
-- how many jobs it holds (fewer than {PRUNE_SCAN}: it reached the table's end).
SELECT MAX(id), COUNT(*) FROM (SELECT id FROM jobs WHERE id > ?1 ORDER BY id LIMIT {PRUNE_SCAN})
