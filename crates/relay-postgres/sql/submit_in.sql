-- A job submitted inside the caller's own transaction (transactional
-- enqueue from Rust): the function of migrations/functions.sql, with its checks, its
-- "submitted" event and the NOTIFY delivered at the caller's commit.
SELECT relay_submit($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
