-- Locks one job's row until the transaction ends (apply_unread.sql runs
-- after it, in a statement of its own: its snapshot then sees every edge
-- committed by a batch that held this row's lock before).
SELECT 1 FROM relay_jobs WHERE id = $1::BIGINT FOR UPDATE
