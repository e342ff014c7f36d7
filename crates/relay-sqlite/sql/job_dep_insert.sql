INSERT INTO job_deps (parent, child, on_failure) VALUES (?1, ?2, ?3)
