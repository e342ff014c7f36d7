-- Relay schema for PostgreSQL, version 6: trace propagation. The W3C trace
-- context (`traceparent`) a job was submitted in, handed to each worker that
-- runs it; NULL for a job submitted outside any trace. `relay_submit(...)`
-- (migration 0005) takes it, and a job's own lease length and timeout, as
-- three more optional arguments; calls written for version 5 work unchanged.
--
--   SELECT relay_submit('emails', 'send', '{}',
--                       p_traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
ALTER TABLE relay_jobs ADD COLUMN traceparent TEXT;

-- The version 5 relay_submit, whose seven arguments CREATE OR REPLACE cannot
-- extend. Its new definition is in functions.sql, which migrate() runs after
-- the migrations; IF EXISTS: migration 0005 no longer creates it either, so
-- only a database that was at version 5 has it.
DROP FUNCTION IF EXISTS relay_submit(TEXT, TEXT, BYTEA, INT, BIGINT, INT, TEXT);
