//! The claim's cost must not grow with queue depth: every hot statement is
//! answered by index seeks, never by scanning the jobs table or sorting.
//! Checked on SQLite's own query plans, with the planner's statistics for a
//! deep queue in place.

use rusqlite::Connection;

fn plan(conn: &Connection, sql: &str) -> Vec<String> {
    let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let n = st.parameter_count();
    let params: Vec<i64> = vec![1; n];
    let rows = st
        .query_map(rusqlite::params_from_iter(params), |r| r.get::<_, String>(3))
        .unwrap();
    rows.map(Result::unwrap).collect()
}

fn schema() -> Connection {
    let conn = Connection::open_in_memory().unwrap();
    for migration in relay_sqlite::MIGRATIONS {
        conn.execute_batch(migration).unwrap();
    }
    // A deep queue: many rows, most finished, one in ten DEAD.
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, lease_token)
         SELECT 'q' || (i % 3), 'k', x'', i % 4, CASE WHEN i % 10 = 0 THEN 'READY' WHEN i % 10 = 1 THEN 'DEAD' ELSE 'SUCCEEDED' END, 0, 3, i, i, 0 FROM n;
         ANALYZE;",
    )
    .unwrap();
    conn
}

fn assert_seeks_only(name: &str, sql: &str) {
    let conn = schema();
    let steps = plan(&conn, sql);
    for step in &steps {
        assert!(
            !step.starts_with("SCAN jobs"),
            "{name} scans the jobs table: {steps:#?}"
        );
        assert!(!step.contains("TEMP B-TREE"), "{name} sorts: {steps:#?}");
    }
    assert!(steps.iter().any(|s| s.starts_with("SEARCH")), "{name}: {steps:#?}");
}

#[test]
fn claim_probes_the_ready_index_once_per_class() {
    let conn = schema();
    let steps = plan(&conn, include_str!("../sql/job_ready_heads.sql"));
    let probes = steps
        .iter()
        .filter(|s| {
            s.starts_with("SEARCH jobs USING")
                && s.contains("COVERING INDEX jobs_ready (queue=? AND priority=? AND ready_at")
        })
        .count();
    assert_eq!(probes, 4, "{steps:#?}");
    assert_seeks_only("job_ready_heads", include_str!("../sql/job_ready_heads.sql"));
}

/// The claim's statements as the store runs them: one copy per page size.
fn pages(sql: &str) -> Vec<String> {
    [1, 16, 128]
        .map(|n| sql.replace("LIMIT 1", &format!("LIMIT {n}")))
        .to_vec()
}

#[test]
fn every_page_of_the_claim_probes_the_ready_index_once_per_class() {
    for sql in pages(include_str!("../sql/job_ready_heads.sql")) {
        let conn = schema();
        let steps = plan(&conn, &sql);
        let probes = steps
            .iter()
            .filter(|s| s.contains("COVERING INDEX jobs_ready (queue=? AND priority=? AND ready_at"))
            .count();
        assert_eq!(probes, 4, "{steps:#?}");
        assert_seeks_only("job_ready_heads", &sql);
    }
}

#[test]
fn the_next_page_of_a_class_is_one_seek_of_the_ready_index() {
    for sql in pages(include_str!("../sql/job_ready_after.sql")) {
        let conn = schema();
        let steps = plan(&conn, &sql);
        assert_eq!(steps.len(), 1, "{steps:#?}");
        assert!(
            steps[0].starts_with("SEARCH jobs USING")
                && steps[0].contains("COVERING INDEX jobs_ready (queue=? AND priority=? AND ready_at"),
            "{steps:#?}"
        );
    }
}

#[test]
fn other_hot_statements_seek() {
    assert_seeks_only("job_next_ready_at", include_str!("../sql/job_next_ready_at.sql"));
    assert_seeks_only("job_ready_after", include_str!("../sql/job_ready_after.sql"));
    assert_seeks_only("job_unique_key", include_str!("../sql/job_unique_key.sql"));
    assert_seeks_only(
        "job_overdue",
        &relay_sqlite::with_limits(include_str!("../sql/job_overdue.sql")),
    );
    assert_seeks_only(
        "job_find_active_by_key",
        include_str!("../sql/job_find_active_by_key.sql"),
    );
    assert_seeks_only("event_next_seq", include_str!("../sql/event_next_seq.sql"));
    assert_seeks_only("event_append_next", include_str!("../sql/event_append_next.sql"));
    assert_seeks_only("job_expiries", include_str!("../sql/job_expiries.sql"));
    assert_seeks_only("job_get_status", include_str!("../sql/job_get_status.sql"));
    assert_seeks_only("job_set_status", include_str!("../sql/job_set_status.sql"));
}

/// Flow control adds a primary-key lookup of the queue's settings to every
/// claim, and for a queue with `max_leased` a count of unexpired leases by
/// a range of the lease index, never by the queue's depth.
#[test]
fn the_claims_flow_control_reads_seek() {
    let conn = schema();
    let steps = plan(&conn, include_str!("../sql/queue_settings.sql"));
    assert_eq!(steps.len(), 1, "{steps:#?}");
    assert!(
        steps[0].starts_with("SEARCH queues USING PRIMARY KEY (name=?)"),
        "{steps:#?}"
    );
    let steps = plan(&conn, include_str!("../sql/job_leased_count.sql"));
    assert_eq!(steps.len(), 1, "{steps:#?}");
    assert!(
        steps[0].starts_with("SEARCH jobs USING INDEX jobs_lease_expiry (lease_expires_at>?)"),
        "{steps:#?}"
    );
}

/// A job that finishes finds the jobs waiting for it with a range of the
/// dependency table's primary key, whatever the size of the graph (a big
/// fan-in and many chains are in place); the check that any edge exists
/// reads one row.
#[test]
fn finding_a_jobs_dependents_seeks() {
    let conn = schema();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO job_deps (parent, child, on_failure)
         SELECT i, CASE WHEN i % 2 = 0 THEN 30000 ELSE i + 1 END, 'cancel' FROM n;
         ANALYZE;",
    )
    .unwrap();
    let steps = plan(&conn, include_str!("../sql/job_dependents.sql"));
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH d USING PRIMARY KEY (parent=?)")),
        "{steps:#?}"
    );
    assert!(
        steps
            .iter()
            .all(|s| !s.starts_with("SCAN d") && !s.contains("TEMP B-TREE")),
        "{steps:#?}"
    );
    let steps = plan(&conn, include_str!("../sql/job_deps_any.sql"));
    assert!(steps.iter().all(|s| !s.contains("TEMP B-TREE")), "{steps:#?}");
    let steps = plan(&conn, include_str!("../sql/job_deps_delete.sql"));
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH job_deps USING PRIMARY KEY (parent=?)")),
        "{steps:#?}"
    );
}

/// Regression: a bare `?N` in a MIN/MAX or `ORDER BY .. LIMIT 1` probe made
/// SQLite re-prepare the statement every time the statement cache handed it
/// out again (the cache clears bindings), which cost most of the writer's
/// time under load. Every hot statement must run re-prepare-free.
/// The dashboard's searches: a tag walks its own entries of `job_tags`, a
/// failed state the partial index of failed jobs, everything else the table
/// from the cursor down by primary key; none sorts.
#[test]
fn searches_seek_their_index_without_sorting() {
    let conn = schema();
    let tag = plan(&conn, include_str!("../sql/job_search_tag.sql"));
    assert!(
        tag.iter()
            .any(|s| s.starts_with("SEARCH t USING PRIMARY KEY (tag=? AND job_id<?)")),
        "{tag:#?}"
    );
    let failed = plan(&conn, include_str!("../sql/job_search_failed.sql"));
    assert!(
        failed
            .iter()
            .any(|s| s.starts_with("SEARCH jobs USING INDEX jobs_failed (state=? AND id<?)")),
        "newest failed jobs first, by an ordered walk of their index: {failed:#?}"
    );
    let any = plan(&conn, include_str!("../sql/job_search.sql"));
    assert!(
        any.iter()
            .any(|s| s.starts_with("SEARCH jobs USING INTEGER PRIMARY KEY (rowid<?)")),
        "{any:#?}"
    );
    for (name, steps) in [("tag", &tag), ("any", &any), ("failed", &failed)] {
        assert!(
            !steps.iter().any(|s| s.contains("TEMP B-TREE")),
            "{name} sorts: {steps:#?}"
        );
    }
    let groups = plan(&conn, include_str!("../sql/job_dead_groups.sql"));
    assert!(
        groups
            .iter()
            .any(|s| s.contains("SEARCH jobs USING INDEX jobs_failed (state=?)")),
        "the window of newest DEAD jobs is an ordered walk: {groups:#?}"
    );
}

#[test]
fn the_throughput_history_is_read_and_pruned_by_its_key() {
    let conn = schema();
    for (name, sql, seek) in [
        (
            "throughput_since",
            include_str!("../sql/throughput_since.sql"),
            "(minute>?)",
        ),
        (
            "throughput_prune",
            include_str!("../sql/throughput_prune.sql"),
            "(minute<?)",
        ),
    ] {
        let steps = plan(&conn, sql);
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SEARCH throughput USING PRIMARY KEY ") && s.ends_with(seek)),
            "{name}: {steps:#?}"
        );
        assert!(
            !steps.iter().any(|s| s.contains("TEMP B-TREE")),
            "{name} sorts: {steps:#?}"
        );
    }
}

#[test]
fn stats_read_the_counts_and_seek_the_oldest_ready_job() {
    let conn = schema();
    // Due jobs not promoted yet: a range of the due index, never a scan.
    let steps = plan(&conn, include_str!("../sql/job_due_counts.sql"));
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH jobs USING INDEX jobs_due (ready_at<?)")),
        "{steps:#?}"
    );
    assert!(!steps.iter().any(|s| s.starts_with("SCAN jobs")), "{steps:#?}");
    let steps = plan(&conn, include_str!("../sql/queue_counts.sql"));
    assert!(
        steps.iter().all(|s| !s.contains("jobs")),
        "counts never read the jobs table: {steps:#?}"
    );
    let steps = plan(&conn, include_str!("../sql/queue_oldest_ready.sql"));
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH jobs USING COVERING INDEX jobs_ready (queue=? AND priority=?)")),
        "{steps:#?}"
    );
    assert!(!steps.iter().any(|s| s.starts_with("SCAN jobs")), "{steps:#?}");
}

#[test]
fn hot_statements_are_never_reprepared() {
    let conn = schema();
    let hot = [
        ("job_ready_heads", include_str!("../sql/job_ready_heads.sql")),
        ("job_next_ready_at", include_str!("../sql/job_next_ready_at.sql")),
        ("job_ready_after", include_str!("../sql/job_ready_after.sql")),
        ("job_ids", include_str!("../sql/job_ids.sql")),
        ("job_overdue", include_str!("../sql/job_overdue.sql")),
        ("event_next_seq", include_str!("../sql/event_next_seq.sql")),
        ("event_append", include_str!("../sql/event_append.sql")),
        ("event_append_next", include_str!("../sql/event_append_next.sql")),
        ("job_get", include_str!("../sql/job_get.sql")),
        ("job_get_status", include_str!("../sql/job_get_status.sql")),
        ("job_set_status", include_str!("../sql/job_set_status.sql")),
        ("job_set_status_queue", include_str!("../sql/job_set_status_queue.sql")),
        ("throughput_add", include_str!("../sql/throughput_add.sql")),
        ("job_counts_add", include_str!("../sql/job_counts_add.sql")),
        ("queue_settings", include_str!("../sql/queue_settings.sql")),
        ("job_leased_count", include_str!("../sql/job_leased_count.sql")),
        ("job_group_leased", include_str!("../sql/job_group_leased.sql")),
        (
            "job_find_active_by_key",
            include_str!("../sql/job_find_active_by_key.sql"),
        ),
    ];
    let paged: Vec<(String, String)> = pages(include_str!("../sql/job_ready_heads.sql"))
        .into_iter()
        .chain(pages(include_str!("../sql/job_ready_after.sql")))
        .chain(pages(include_str!("../sql/job_fair_after.sql")))
        .chain(pages(include_str!("../sql/job_group_next.sql")))
        .map(|sql| (format!("claim page {}", sql.len()), sql))
        .collect();
    let hot = hot
        .iter()
        .map(|(n, s)| (n.to_string(), relay_sqlite::with_limits(s)))
        .chain(paged);
    for (name, sql) in hot {
        let sql = sql.as_str();
        for i in 0..50i64 {
            let mut st = conn.prepare_cached(sql).unwrap();
            for p in 1..=st.parameter_count() {
                st.raw_bind_parameter(p, i * 31 + p as i64).unwrap();
            }
            let mut rows = st.raw_query();
            while rows.next().unwrap().is_some() {}
        }
        let n = conn
            .prepare_cached(sql)
            .unwrap()
            .get_status(rusqlite::StatementStatus::RePrepare);
        assert_eq!(n, 0, "{name} was re-prepared {n} times in 50 runs");
    }
}

/// The prune reads a window of the jobs table along its primary key, joins
/// each job's queue settings by theirs, and deletes one job by its key:
/// its cost is the window's, whatever the table holds.
#[test]
fn the_prune_reads_its_window_along_the_primary_key() {
    let conn = schema();
    for (name, sql) in [
        (
            "job_finished_window",
            relay_sqlite::with_limits(include_str!("../sql/job_finished_window.sql")),
        ),
        (
            "job_window_end",
            relay_sqlite::with_limits(include_str!("../sql/job_window_end.sql")),
        ),
    ] {
        let steps = plan(&conn, &sql);
        assert!(
            steps
                .iter()
                .any(|s| s.starts_with("SEARCH jobs USING INTEGER PRIMARY KEY (rowid>?)")),
            "{name}: {steps:#?}"
        );
        assert!(!steps.iter().any(|s| s.starts_with("SCAN jobs")), "{name}: {steps:#?}");
        assert!(
            !steps.iter().any(|s| s.starts_with("SCAN q")),
            "{name} scans the queues: {steps:#?}"
        );
        assert!(
            !steps.iter().any(|s| s.contains("TEMP B-TREE")),
            "{name} sorts: {steps:#?}"
        );
    }
    assert_seeks_only("job_delete_finished", include_str!("../sql/job_delete_finished.sql"));
}

/// Groups: the claim of grouped jobs is one seek of `jobs_fair` per class
/// and the next page one seek, whatever the number of groups and jobs (a
/// thousand groups of twenty READY jobs are in place); a group's count of
/// leases is a range of the lease index; what the turn triggers read is a
/// seek each; and the claim of jobs without a group still reads only
/// `jobs_ready`, which holds no grouped job.
#[test]
fn the_grouped_claim_seeks_whatever_the_number_of_groups() {
    let conn = schema();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000)
         INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at,
                           lease_token, grp)
         SELECT 'q0', 'k', x'', i % 4, 'READY', 0, 3, i, i, 0, 'g' || (i % 1000) FROM n;
         ANALYZE;",
    )
    .unwrap();
    let turns: i64 = conn
        .query_row("SELECT count(DISTINCT turn) FROM jobs WHERE grp IS NOT NULL", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert!(turns >= 5, "the insert trigger gave turns: {turns}");
    for sql in pages(include_str!("../sql/job_ready_heads.sql")) {
        let steps = plan(&conn, &sql);
        let fair = steps
            .iter()
            .filter(|s| s.contains("COVERING INDEX jobs_fair (queue=? AND priority=?)"))
            .count();
        let ready = steps
            .iter()
            .filter(|s| s.contains("COVERING INDEX jobs_ready (queue=? AND priority=? AND ready_at"))
            .count();
        assert_eq!((fair, ready), (4, 4), "{steps:#?}");
        for step in &steps {
            assert!(
                !step.starts_with("SCAN jobs") && !step.contains("TEMP B-TREE"),
                "{steps:#?}"
            );
        }
    }
    for sql in pages(include_str!("../sql/job_fair_after.sql")) {
        let steps = plan(&conn, &sql);
        assert_eq!(steps.len(), 1, "{steps:#?}");
        assert!(
            // SQLite seeks the turn and passes over the ids of that turn
            // already read: at most one job a group.
            steps[0].starts_with("SEARCH jobs USING COVERING INDEX jobs_fair (queue=? AND priority=? AND turn>?)"),
            "{steps:#?}"
        );
    }
    let steps = plan(&conn, include_str!("../sql/job_group_leased.sql"));
    assert!(
        steps.iter().any(|s| s
            .starts_with("SEARCH j USING COVERING INDEX jobs_group_leased (queue=? AND grp=? AND lease_expires_at>?)")),
        "{steps:#?}"
    );
    // One seek per group named, never a scan of the queue's leases.
    assert!(!steps.iter().any(|s| s.starts_with("SCAN j")), "{steps:#?}");
    // A group's line, read on once the claim took its head: one seek of
    // jobs_group_turn, in its order.
    for sql in pages(include_str!("../sql/job_group_next.sql")) {
        let steps = plan(&conn, &sql);
        assert_eq!(steps.len(), 1, "{steps:#?}");
        assert!(
            steps[0].starts_with(
                "SEARCH jobs USING COVERING INDEX jobs_group_turn (queue=? AND priority=? AND grp=? AND turn>?)"
            ),
            "{steps:#?}"
        );
    }
    // The triggers' reads (migrations/0013_groups.sql, 0014_group_heads.sql).
    let last = "SELECT max(turn) + 1 FROM jobs INDEXED BY jobs_group_turn
                WHERE state = 'READY' AND grp IS NOT NULL AND queue = ?1 AND priority = ?4 AND grp = ?2 AND id <> ?3";
    let front = "SELECT turn FROM jobs INDEXED BY jobs_fair
                 WHERE state = 'READY' AND grp IS NOT NULL AND head = 1 AND queue = ?1 AND priority = ?2 AND id <> ?3
                 ORDER BY turn, id LIMIT 1";
    let alone = "SELECT NOT EXISTS (SELECT 1 FROM jobs INDEXED BY jobs_group_turn
                 WHERE state = 'READY' AND grp IS NOT NULL AND queue = ?1 AND priority = ?4 AND grp = ?2 AND id <> ?3)";
    let next = "UPDATE jobs SET head = 1
                WHERE id = (SELECT id FROM jobs INDEXED BY jobs_group_turn
                            WHERE state = 'READY' AND grp IS NOT NULL AND queue = ?1 AND priority = ?2 AND grp = ?3
                            ORDER BY turn, id LIMIT 1)";
    for sql in [last, front, alone, next] {
        assert_seeks_only("a turn or head trigger's statement", sql);
    }
    // Only heads are in jobs_fair: one a group, the first of its line.
    let heads: (i64, i64, i64) = conn
        .query_row(
            "SELECT count(*), count(DISTINCT queue || '/' || priority || '/' || grp),
                    sum(turn = (SELECT min(o.turn) FROM jobs o WHERE o.state = 'READY' AND o.queue = j.queue
                                AND o.priority = j.priority AND o.grp = j.grp))
             FROM jobs j WHERE state = 'READY' AND head = 1",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // (A group's jobs are all of one class here: i % 4 follows i % 1000.)
    assert_eq!(heads, (1000, 1000, 1000), "one head a group and class, its first");
    assert_seeks_only("job_insert_grouped", include_str!("../sql/job_insert_grouped.sql"));
    // Relay's insert of a grouped job gives it its turn, and is prepared
    // once however its values change.
    let sql = include_str!("../sql/job_insert_grouped.sql");
    for i in 0..50i64 {
        let mut st = conn.prepare_cached(sql).unwrap();
        let group = format!("g{}", i % 7);
        st.execute(rusqlite::params![
            1_000_000 + i,
            "q0",
            "k",
            b"",
            i % 4,
            "READY",
            0,
            3,
            i,
            i,
            None::<i64>,
            None::<String>,
            None::<Vec<u8>>,
            0,
            None::<i64>,
            None::<String>,
            None::<String>,
            None::<i64>,
            None::<i64>,
            0,
            None::<String>,
            None::<String>,
            group
        ])
        .unwrap();
    }
    let n = conn
        .prepare_cached(sql)
        .unwrap()
        .get_status(rusqlite::StatementStatus::RePrepare);
    assert_eq!(n, 0, "job_insert_grouped was re-prepared {n} times in 50 runs");
    let untaken: i64 = conn
        .query_row(
            "SELECT count(*) FROM jobs WHERE id >= 1000000 AND turn IS NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(untaken, 0, "every grouped job inserted READY has a turn");
    assert_seeks_only("job_next_ready_at", include_str!("../sql/job_next_ready_at.sql"));
    let steps = plan(&conn, include_str!("../sql/queue_oldest_ready.sql"));
    assert!(
        steps
            .iter()
            .any(|s| s.starts_with("SEARCH jobs USING COVERING INDEX jobs_group_wait (queue=?)")),
        "{steps:#?}"
    );
}
