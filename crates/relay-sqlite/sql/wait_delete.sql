-- A job's wait, ended (its event came, its time ran out, its step is recorded).
DELETE FROM waits WHERE job_id = ?1
