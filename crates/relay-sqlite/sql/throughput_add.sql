-- Adds a batch's counts to its queue's minute.
INSERT INTO throughput (minute, queue, submitted, succeeded, failed, dead)
VALUES (?1, ?2, ?3, ?4, ?5, ?6)
ON CONFLICT (minute, queue) DO UPDATE SET
    submitted = submitted + excluded.submitted, succeeded = succeeded + excluded.succeeded,
    failed = failed + excluded.failed, dead = dead + excluded.dead
