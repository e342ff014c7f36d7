-- A job the batch adds events to but neither inserts nor updates (a user's
-- event): its last event number (last_seq, migration 0021) is set to not
-- known, and its next transition reads it from the events. One job a
-- statement: a generic plan of an array of ids made while the table is
-- small scans the whole table ever after; one id is a search of the key.
UPDATE relay_jobs SET last_seq = NULL WHERE id = $1 AND last_seq IS NOT NULL
