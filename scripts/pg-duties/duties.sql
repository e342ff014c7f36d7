WITH c AS (UPDATE tb.djobs SET state = 'LEASED', token = token + 1 WHERE id = (SELECT id FROM tb.djobs WHERE state = 'READY' ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id, token),
 e AS (INSERT INTO tb.events SELECT id, 2, 0, 'leased', '{"worker":"w"}' FROM c)
SELECT id, token FROM c \gset
WITH a AS (UPDATE tb.djobs SET state = 'DONE' WHERE id = :id AND token = :token AND state = 'LEASED' RETURNING id, queue),
 e AS (INSERT INTO tb.events SELECT id, 3, 0, 'succeeded', '' FROM a),
 t AS (INSERT INTO tb.throughput SELECT 0, queue, pg_backend_pid(), 1 FROM a ON CONFLICT (minute, queue, shard) DO UPDATE SET succeeded = tb.throughput.succeeded + 1)
SELECT count(*) FROM a;
