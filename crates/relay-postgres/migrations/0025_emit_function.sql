-- Relay schema, version 25: relay_emit(key, payload), an event emitted
-- inside the caller's own transaction, and its helpers relay_steps_append
-- and relay_le: made from functions.sql after this migration, as every
-- function is. Nothing else changes.
SELECT 1;
