UPDATE tb.jobs SET state = 'LEASED', token = token + 1 WHERE id = (SELECT id FROM tb.jobs WHERE state = 'READY' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, token \gset
UPDATE tb.jobs SET state = 'DONE' WHERE id = :id AND token = :token AND state = 'LEASED';
