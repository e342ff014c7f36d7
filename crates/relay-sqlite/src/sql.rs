//! The statements of `sql/`, compacted once per process.
//!
//! The files keep their comments; what SQLite (and rusqlite's statement
//! cache) sees is the compacted text. The cache copies a statement's text
//! into a fresh `Arc<str>` and hashes it on every use, so a 1,200-byte
//! commented claim query cost measurably more than its 600 bytes of SQL
//! (see BENCHMARKS.md).

use std::sync::LazyLock;

macro_rules! statements {
    ($($name:ident = $file:literal;)*) => {
        $(
            pub(crate) static $name: LazyLock<String> =
                LazyLock::new(|| compact(&with_limits(include_str!(concat!("../sql/", $file)))));
        )*

        /// Every statement, for tests.
        #[cfg(test)]
        fn all() -> Vec<&'static str> {
            vec![$($name.as_str()),*]
        }
    };
}

statements! {
    EVENT_APPEND = "event_append.sql";
    EVENT_APPEND_NEXT = "event_append_next.sql";
    EVENT_NEXT_SEQ = "event_next_seq.sql";
    JOB_COUNTS_ADD = "job_counts_add.sql";
    JOB_DELETE = "job_delete.sql";
    JOB_DUE_COUNTS = "job_due_counts.sql";
    JOB_DEPENDENTS = "job_dependents.sql";
    JOB_DEPS_ANY = "job_deps_any.sql";
    JOB_DEP_INSERT = "job_dep_insert.sql";
    JOB_DEPS_DELETE = "job_deps_delete.sql";
    JOB_EVENTS = "job_events.sql";
    JOB_EVENTS_DELETE = "job_events_delete.sql";
    JOB_OVERDUE = "job_overdue.sql";
    JOB_EXPIRIES = "job_expiries.sql";
    JOB_FIND_ACTIVE_BY_KEY = "job_find_active_by_key.sql";
    JOB_GET = "job_get.sql";
    JOB_GET_STATUS = "job_get_status.sql";
    JOB_INSERT = "job_insert.sql";
    JOB_INSERT_GROUPED = "job_insert_grouped.sql";
    JOB_IDS = "job_ids.sql";
    JOB_LEASED_COUNT = "job_leased_count.sql";
    JOB_UNIQUE_KEY = "job_unique_key.sql";
    JOB_COUNT_AFTER = "job_count_after.sql";
    JOB_SEARCH = "job_search.sql";
    JOB_TAG_INSERT = "job_tag_insert.sql";
    JOB_SEARCH_TAG = "job_search_tag.sql";
    JOB_SEARCH_FAILED = "job_search_failed.sql";
    JOB_DEAD_GROUPS = "job_dead_groups.sql";
    JOB_NEXT_READY_AT = "job_next_ready_at.sql";
    JOB_DELETE_FINISHED = "job_delete_finished.sql";
    JOB_FINISHED_WINDOW = "job_finished_window.sql";
    JOB_WINDOW_END = "job_window_end.sql";
    JOB_READY_AFTER = "job_ready_after.sql";
    JOB_READY_HEADS = "job_ready_heads.sql";
    JOB_FAIR_AFTER = "job_fair_after.sql";
    JOB_GROUP_NEXT = "job_group_next.sql";
    JOB_GROUP_LEASED = "job_group_leased.sql";
    JOB_GROUP_OF = "job_group_of.sql";
    JOB_HEAD_PASS = "job_head_pass.sql";
    JOB_TAGS_DELETE = "job_tags_delete.sql";
    JOB_TURN_GIVE = "job_turn_give.sql";
    JOB_SET_FIELDS = "job_set_fields.sql";
    JOB_SET_STATUS = "job_set_status.sql";
    JOB_SET_STATUS_QUEUE = "job_set_status_queue.sql";
    MARK_GET = "mark_get.sql";
    MARKS_PAGE = "marks_page.sql";
    TOKENS_OPEN = "tokens_open.sql";
    AWAITED_KEYS = "awaited_keys.sql";
    MARK_PRUNE = "mark_prune.sql";
    MARK_PUT = "mark_put.sql";
    WAIT_DELETE = "wait_delete.sql";
    WAIT_OF = "wait_of.sql";
    WAIT_PUT = "wait_put.sql";
    WAITS_ON = "waits_on.sql";
    QUEUE_BUSIEST = "queue_busiest.sql";
    QUEUE_COUNTS = "queue_counts.sql";
    QUEUE_NAMES = "queue_names.sql";
    QUEUE_OLDEST_READY = "queue_oldest_ready.sql";
    QUEUE_PUT = "queue_put.sql";
    QUEUE_SETTINGS = "queue_settings.sql";
    QUEUE_SETTINGS_ALL = "queue_settings_all.sql";
    QUEUE_TOTALS = "queue_totals.sql";
    SCHEDULE_DELETE = "schedule_delete.sql";
    SCHEDULE_GET = "schedule_get.sql";
    SCHEDULE_PUT = "schedule_put.sql";
    SCHEDULES_ALL = "schedules_all.sql";
    SCHEDULES_DUE = "schedules_due.sql";
    THROUGHPUT_ADD = "throughput_add.sql";
    THROUGHPUT_PRUNE = "throughput_prune.sql";
    THROUGHPUT_QUEUE = "throughput_queue.sql";
    WORKER_PUT = "worker_put.sql";
    WORKER_PRUNE = "worker_prune.sql";
    WORKERS_PAGE = "workers_page.sql";
    THROUGHPUT_SINCE = "throughput_since.sql";
    THROUGHPUT_TOTAL = "throughput_total.sql";
}

/// Page sizes of the claim's reads, each its own statement (a bound LIMIT
/// makes SQLite re-prepare): the smallest one at least the size asked for.
/// Powers of two, so a page reads at most twice what it needs.
pub(crate) const PAGES: [usize; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

fn paged(sql: &str) -> [String; 8] {
    PAGES.map(|n| sql.replace("LIMIT 1", &format!("LIMIT {n}")))
}

/// `job_ready_heads.sql` for each of [`PAGES`].
pub(crate) static JOB_READY_PAGES: LazyLock<[String; 8]> = LazyLock::new(|| paged(&JOB_READY_HEADS));
/// `job_ready_after.sql` for each of [`PAGES`].
pub(crate) static JOB_READY_AFTER_PAGES: LazyLock<[String; 8]> = LazyLock::new(|| paged(&JOB_READY_AFTER));
/// `job_fair_after.sql` for each of [`PAGES`].
pub(crate) static JOB_FAIR_AFTER_PAGES: LazyLock<[String; 8]> = LazyLock::new(|| paged(&JOB_FAIR_AFTER));
/// `job_group_next.sql` for each of [`PAGES`].
pub(crate) static JOB_GROUP_NEXT_PAGES: LazyLock<[String; 8]> = LazyLock::new(|| paged(&JOB_GROUP_NEXT));

/// The page of [`PAGES`] for `limit` rows: its index and size.
pub(crate) fn page(limit: usize) -> (usize, usize) {
    let i = PAGES.iter().position(|n| *n >= limit).unwrap_or(PAGES.len() - 1);
    (i, PAGES[i])
}

/// `sql` with its batch limits written in from `relay_store`'s constants
/// (`{REAP_BATCH}`, `{PRUNE_BATCH}`, `{PRUNE_SCAN}`): literals, because a
/// bound LIMIT makes SQLite re-prepare the statement on every run.
pub fn with_limits(sql: &str) -> String {
    sql.replace("{REAP_BATCH}", &relay_store::REAP_BATCH.to_string())
        .replace("{PRUNE_BATCH}", &relay_store::PRUNE_BATCH.to_string())
        .replace("{PRUNE_SCAN}", &relay_store::PRUNE_SCAN.to_string())
}

/// Drops `--` comments and collapses runs of whitespace to one space,
/// leaving quoted text ('...' and "...") exactly as written.
pub(crate) fn compact(sql: &str) -> String {
    let mut out = String::with_capacity(sql.len());
    let mut chars = sql.chars().peekable();
    let mut space = false;
    while let Some(c) = chars.next() {
        match c {
            '\'' | '"' => {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                out.push(c);
                for q in chars.by_ref() {
                    out.push(q);
                    if q == c {
                        break; // a doubled quote reopens at the next char: same result
                    }
                }
            }
            '-' if chars.peek() == Some(&'-') => {
                for q in chars.by_ref() {
                    if q == '\n' {
                        break;
                    }
                }
                space = true;
            }
            c if c.is_whitespace() => space = true,
            c => {
                if space && !out.is_empty() {
                    out.push(' ');
                }
                space = false;
                out.push(c);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// The statements write the states waiting to be leased as `state
    /// BETWEEN 'READY' AND 'SCHEDULED'`, and those waiting for their time
    /// as `BETWEEN 'RETRYING' AND 'SCHEDULED'` (an IN list costs the claim
    /// a fifth): exact only while no other state's name sorts between.
    #[test]
    fn the_pending_states_are_a_range_of_names() {
        use relay_core::JobState;
        let between = |lo: &str, hi: &str| -> Vec<JobState> {
            let mut v: Vec<JobState> = JobState::ALL
                .into_iter()
                .filter(|s| (lo..=hi).contains(&s.as_str()))
                .collect();
            v.sort();
            v
        };
        let pending: Vec<JobState> = JobState::ALL.into_iter().filter(|s| s.is_pending()).collect();
        assert_eq!(between("READY", "SCHEDULED"), pending);
        assert_eq!(
            between("RETRYING", "SCHEDULED"),
            [JobState::Scheduled, JobState::Retrying]
        );
    }

    use super::compact;

    #[test]
    fn comments_and_whitespace_go_quoted_text_stays() {
        let sql = "-- a comment\nSELECT  a,\n   b -- trailing\nFROM t\n  WHERE s = 'x  -- not a comment' AND \"c  d\" = 'it''s'\n";
        assert_eq!(
            compact(sql),
            "SELECT a, b FROM t WHERE s = 'x  -- not a comment' AND \"c  d\" = 'it''s'"
        );
    }

    #[test]
    fn every_statement_is_shorter_and_still_parses() {
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        for m in crate::connection::MIGRATIONS {
            conn.execute_batch(m).unwrap();
        }
        for sql in super::all() {
            assert!(!sql.contains("--") && !sql.contains('\n'), "{sql}");
            conn.prepare(sql).unwrap_or_else(|e| panic!("{e}: {sql}"));
        }
        assert!(super::JOB_READY_HEADS.len() < include_str!("../sql/job_ready_heads.sql").len() * 2 / 3);
        // The batch limits are relay_store's, written in as literals.
        assert!(super::JOB_OVERDUE.ends_with(&format!("LIMIT {})", relay_store::REAP_BATCH)));
        for sql in [&super::JOB_FINISHED_WINDOW, &super::JOB_WINDOW_END] {
            assert!(
                sql.contains(&format!("LIMIT {}", relay_store::PRUNE_SCAN)),
                "{}",
                sql.as_str()
            );
        }
    }
}
