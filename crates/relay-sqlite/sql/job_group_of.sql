-- A job's group and head flag, for a job leaving READY whose row the
-- batch did not read as a claim candidate (see job_head_pass.sql).
SELECT queue, priority, grp, head FROM jobs WHERE id = ?1
