-- Forgets minutes older than the history keeps.
DELETE FROM throughput WHERE minute < ?1
