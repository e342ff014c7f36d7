-- Forgets up to ?2 marks that expired at or before ?1, oldest first.
DELETE FROM marks WHERE key IN (SELECT key FROM marks WHERE expires_at <= ?1 ORDER BY expires_at LIMIT ?2)
