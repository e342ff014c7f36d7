-- Pages of queues (GET /v1/stats, GET /v1/queues, the dashboard) read
-- queue names in byte order, COLLATE "C" (SQLite's order, and Rust's),
-- whatever the database's own collation. The primary keys are in the
-- database's collation, so a page would scan every queue under another
-- one (en_US.UTF-8, say); these indexes let it read only its own rows.
CREATE INDEX relay_job_counts_queue_c ON relay_job_counts ((queue COLLATE "C"), state);
CREATE INDEX relay_queues_name_c ON relay_queues ((name COLLATE "C"));
