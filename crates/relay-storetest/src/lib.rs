//! The conformance suite: every behaviour of the core, written once against
//! the public API, run unchanged by every store.
//!
//! A store's test file names a factory of fresh databases and expands
//! [`conformance!`], which makes one `#[test]` per case:
//!
//! ```text
//! relay_storetest::conformance!(relay_storetest::SqliteFile::fresh);
//! ```
//!
//! Cases take time from a [`relay::ManualClock`] so that leases expire and
//! jobs age without sleeping.

#![allow(clippy::unwrap_used, clippy::missing_panics_doc)]

pub mod batches;
pub mod deps;
pub mod fencing;
pub mod flow;
pub mod group_commit;
pub mod groups;
pub mod input;
pub mod lifecycle;
pub mod marks;
pub mod model;
pub mod periodic;
pub mod pg;
pub mod retries;
pub mod scheduling;
pub mod search;
pub mod steps;
pub mod throughput;
pub mod unique;
pub mod visitors;
pub mod work;
pub mod workers;

use relay::{ManualClock, Options, Relay, RetryPolicy, Timestamp};
use std::sync::Arc;
use std::time::Duration;

/// One empty database of the store under test, which can be opened
/// (and reopened) any number of times.
pub trait TestDb: Send + Sync {
    fn open(&self, options: Options) -> relay::Result<Relay>;
    /// Opened with one writer, for tests that hold it to build one batch
    /// (see `Relay::hold_writer`).
    fn open_one_writer(&self, options: Options) -> relay::Result<Relay> {
        self.open(options)
    }
}

/// Makes a fresh, empty database.
pub type NewDb = dyn Fn() -> Box<dyn TestDb>;

/// A SQLite file in its own temporary directory.
pub struct SqliteFile {
    dir: tempfile::TempDir,
}

impl SqliteFile {
    pub fn fresh() -> Box<dyn TestDb> {
        Box::new(Self {
            dir: tempfile::tempdir().unwrap(),
        })
    }

    pub fn path(&self) -> std::path::PathBuf {
        self.dir.path().join("relay.db")
    }
}

impl TestDb for SqliteFile {
    fn open(&self, options: Options) -> relay::Result<Relay> {
        Relay::open_with(self.path(), options)
    }
}

/// A fresh PostgreSQL database on the test server (see [`pg`]).
pub struct PgDb {
    url: String,
    /// Made by [`PgDb::fresh`], and dropped with this value.
    owned: bool,
    /// Candidates locked with `SKIP LOCKED` (see `PgBackend::skip_locked`).
    skip_locked: bool,
    /// The same database through PgBouncer in transaction mode, which
    /// Relays then open (`LISTEN` on `url`, directly).
    pooled: Option<String>,
}

impl PgDb {
    /// The database at `url`, left as it is when this value is dropped.
    pub fn fresh_at(url: String) -> Self {
        Self {
            url,
            owned: false,
            skip_locked: true,
            pooled: None,
        }
    }

    /// A new database on the shared test server, dropped (with whatever
    /// connections are still open to it) when the value is.
    pub fn fresh() -> Box<dyn TestDb> {
        Box::new(Self {
            url: pg::PgServer::shared().new_database(),
            owned: true,
            skip_locked: true,
            pooled: None,
        })
    }

    /// [`PgDb::fresh`], its Relays connecting through PgBouncer in
    /// transaction mode (`Pooler::Transaction`), with `LISTEN` on a direct
    /// connection.
    pub fn fresh_through_pgbouncer() -> Box<dyn TestDb> {
        Box::new(Self::through_pgbouncer())
    }

    /// [`PgDb::fresh_through_pgbouncer`], as itself.
    pub fn through_pgbouncer() -> Self {
        let url = pg::PgServer::shared().new_database();
        let name = url.rsplit_once('/').map(|(_, n)| n.to_owned()).unwrap_or_default();
        Self {
            pooled: Some(pg::PgBouncer::shared().url_of(&name)),
            url,
            owned: true,
            skip_locked: true,
        }
    }

    /// The URL Relays open: through the pooler, if there is one.
    pub fn relay_url(&self) -> &str {
        self.pooled.as_deref().unwrap_or(&self.url)
    }

    /// [`PgDb::fresh`], its Relays locking candidates without `SKIP
    /// LOCKED`: correctness must not rest on it.
    pub fn fresh_without_skip_locked() -> Box<dyn TestDb> {
        Box::new(Self {
            url: pg::PgServer::shared().new_database(),
            owned: true,
            skip_locked: false,
            pooled: None,
        })
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PgDb {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = pg::PgServer::shared().drop_database(&self.url) {
                eprintln!("{e}");
            }
        }
    }
}

impl PgDb {
    fn backend(&self) -> relay_postgres::PgBackend {
        let backend = relay_postgres::PgBackend::new(self.relay_url()).skip_locked(self.skip_locked);
        match self.pooled {
            Some(_) => backend
                .pooler(relay_postgres::Pooler::Transaction)
                .listen_url(self.url.clone()),
            None => backend,
        }
    }
}

impl TestDb for PgDb {
    fn open(&self, options: Options) -> relay::Result<Relay> {
        Relay::with_backend(Arc::new(self.backend()), options)
    }

    fn open_one_writer(&self, options: Options) -> relay::Result<Relay> {
        Relay::with_backend(Arc::new(self.backend().with_writers(1)), options)
    }
}

/// Options on a manual clock, with deterministic back-off (no jitter).
pub fn clocked() -> (Options, Arc<ManualClock>) {
    let clock = Arc::new(ManualClock::new(Timestamp::from_millis(1_700_000_000_000)));
    let options = Options {
        clock: clock.clone(),
        retry: RetryPolicy {
            base: Duration::from_secs(1),
            cap: Duration::from_secs(60),
            jitter: 0.0,
        },
        ..Options::default()
    };
    (options, clock)
}

/// A fresh database opened on a manual clock.
pub fn open_clocked(new_db: &NewDb) -> (Relay, Arc<ManualClock>, Box<dyn TestDb>) {
    let db = new_db();
    let (options, clock) = clocked();
    let relay = db.open(options).unwrap();
    (relay, clock, db)
}

/// Expands to one `#[test]` per conformance case, each on fresh databases
/// from `$new_db` (a `fn() -> Box<dyn TestDb>`).
#[macro_export]
macro_rules! conformance {
    ($new_db:expr) => {
        $crate::conformance!(@cases $new_db;
            lifecycle::submit_lease_ack,
            lifecycle::events_and_user_events,
            lifecycle::traceparent_is_kept_and_handed_out,
            lifecycle::progress_is_kept_on_the_job,
            steps::recorded_steps_come_with_every_later_lease,
            steps::a_stale_lease_cannot_record_a_step,
            steps::steps_are_bounded_per_job,
            steps::a_sleeping_job_holds_no_lease_until_its_time,
            steps::sleepers_wake_by_the_reap_and_cancel_ends_a_sleep,
            steps::an_emit_wakes_its_waiters_and_the_first_emit_stands,
            steps::a_wait_times_out_at_its_first_time,
            steps::a_retry_keeps_the_steps_unless_told_to_reset_them,
            steps::a_parked_job_is_not_told_of_a_dependency_it_no_longer_waits_on,
            steps::step_records_go_with_other_outcomes_in_one_operation,
            steps::result_awaits_the_end_of_a_job,
            steps::a_join_waits_for_the_child_and_records_how_it_ended,
            steps::a_completion_token_completes_once_with_its_secret,
            steps::waiting_for_says_what_a_waiting_job_waits_for,
            steps::the_events_pages_reads_list_waits_events_and_open_tokens,
            batches::a_wait_and_an_emit_of_its_key_in_one_batch,
            lifecycle::expired_and_lost_leases_are_counted,
            lifecycle::queue_waits_are_histograms_by_queue_and_kind,
            lifecycle::outcomes_and_run_times_by_queue_and_kind,
            groups::groups_are_taken_in_turn,
            groups::a_job_back_in_its_group_waits_its_turn,
            groups::a_delayed_grouped_job_takes_its_turn_when_it_comes_due,
            groups::jobs_of_a_group_due_together_keep_the_order_they_came_due,
            groups::a_reclaimed_job_queues_behind_its_groups_ready_jobs,
            groups::a_deleted_or_cancelled_head_hands_its_group_on,
            groups::max_leased_per_group_bounds_each_group,
            groups::group_input_is_checked,
            groups::a_groups_turns_are_kept_per_priority_class,
            groups::a_group_at_its_limit_holds_back_no_other_group,
            batches::a_group_limit_set_partway_through_a_batch_counts_earlier_leases,
            search::search_by_every_filter_with_cursor_paging,
            search::bulk_actions_take_every_match_and_pass_over_the_rest,
            search::dead_jobs_are_grouped_by_queue_kind_and_first_line,
            throughput::throughput_counts_each_end_per_queue_and_minute,
            lifecycle::unique_key_dedupes_until_finished,
            lifecycle::cancel_retry_delete,
            lifecycle::release_gives_job_back,
            lifecycle::lease_many_across_queues,
            lifecycle::stats_counts_and_oldest_age,
            scheduling::scheduled_and_retrying_are_told_apart_from_ready,
            scheduling::stats_count_a_due_job_ready_before_any_writer_promotes_it,
            scheduling::a_backlog_of_due_jobs_is_promoted_pass_after_pass,
            lifecycle::stats_come_a_page_at_a_time,
            lifecycle::jobs_survive_reopen,
            lifecycle::lease_wait_is_woken_by_submit,
            lifecycle::lease_wait_times_out_empty,
            lifecycle::async_api_round_trip,
            lifecycle::complete_batch_settles_each_job_alone,
            work::complete_and_lease_answers_each_outcome_and_leases_in_one_commit,
            work::complete_and_lease_releases_and_waits_only_without_outcomes,
            work::extend_batch_answers_each_lease,
            lifecycle::finished_jobs_are_pruned_by_their_retention,
            lifecycle::the_prune_goes_past_the_jobs_it_keeps,
            workers::workers_are_alive_gone_or_stopped,
            workers::workers_not_seen_for_an_hour_are_forgotten,
            workers::a_workers_record_is_written_only_by_its_maker,
            workers::a_record_naming_another_workers_lease_orphans_nothing,
            fencing::expired_lease_is_lost_and_next_holder_acks,
            fencing::cancelled_lease_is_lost,
            fencing::extend_keeps_the_job,
            fencing::reaper_reclaims_without_a_caller,
            fencing::a_holder_sees_what_another_relay_did_to_its_job,
            scheduling::higher_class_first_when_fresh,
            scheduling::aged_low_priority_beats_newer_urgent,
            scheduling::no_starvation_under_urgent_stream,
            retries::dead_after_max_attempts_with_every_error,
            retries::backoff_grows_and_respects_cap,
            retries::delayed_jobs_are_not_leased_early,
            retries::permanent_failure_dies_at_once,
            retries::a_job_whose_lease_keeps_expiring_is_dead_as_a_poison_pill,
            retries::a_queues_own_poison_after_wins,
            input::bad_submits_change_nothing,
            input::unknown_ids_are_not_found,
            input::bad_lease_requests_are_refused,
            input::oversized_result_and_event_are_refused,
            group_commit::many_callers_share_commits,
            model::matches_the_model,
            unique::retry_into_a_held_key_is_a_conflict_that_fails_alone,
            unique::concurrent_submits_of_one_key_get_one_job,
            unique::a_throttled_key_answers_its_job_for_the_period,
            unique::a_debounced_key_replaces_its_job_until_it_starts,
            marks::an_idempotency_key_returns_the_first_job_for_its_keep,
            marks::a_bad_idempotency_key_is_refused_and_changes_nothing,
            marks::concurrent_submits_of_one_idempotency_key_get_one_job,
            marks::marks_are_written_once_and_expire,
            batches::a_submit_its_cancel_and_a_claim_in_one_batch,
            batches::a_submit_and_its_claim_in_one_batch,
            batches::a_prune_and_a_retry_of_what_it_prunes_in_one_batch,
            batches::a_lease_and_its_ack_in_one_batch,
            batches::a_stale_ack_beside_valid_acks_fails_alone,
            batches::a_batch_of_refused_operations_writes_nothing,
            batches::a_reap_beside_operations_on_its_jobs_in_one_batch,
            flow::snooze_puts_the_job_back_for_later_without_an_attempt,
            flow::pause_stops_leases_of_the_queue_until_resume,
            flow::pause_refuses_a_bad_queue_name_and_shows_an_empty_paused_queue,
            flow::resume_wakes_a_waiting_lease,
            flow::a_pause_is_seen_by_another_relay_on_the_store,
            flow::max_leased_caps_the_queue_and_not_the_others,
            flow::a_rate_limit_allows_its_count_per_window,
            flow::bad_limits_are_refused_and_change_nothing,
            flow::a_limit_holds_across_relays_on_the_store,
            flow::a_jobs_own_lease_length_and_timeout,
            batches::claims_in_one_batch_share_the_queue_limit,
            batches::a_schedule_added_and_removed_in_one_batch,
            batches::a_limit_set_partway_through_a_batch_counts_its_earlier_leases,
            periodic::an_interval_schedule_enqueues_one_job_per_tick,
            periodic::a_schedules_jobs_carry_its_group,
            periodic::a_cron_schedule_runs_once_a_day_across_daylight_saving_changes,
            periodic::schedules_are_paused_resumed_replaced_and_removed,
            periodic::bad_schedules_are_refused_and_change_nothing,
            periodic::two_relays_on_the_store_enqueue_a_tick_once,
            periodic::five_hundred_schedules_each_tick_and_late_ticks_are_counted,
            periodic::a_running_scheduler_keeps_up_with_five_hundred_schedules,
            batches::a_pause_or_resume_and_a_claim_in_one_batch,
            batches::a_dependent_submitted_and_its_parent_acked_in_one_batch,
            deps::a_chain_runs_one_link_at_a_time,
            deps::a_chain_of_a_thousand,
            deps::a_fan_in_of_ten_thousand,
            deps::a_failed_dependency_cancels_its_dependents_in_turn,
            deps::dependencies_finished_before_the_submit,
            deps::a_waiting_job_keeps_its_delay_key_and_can_be_cancelled,
            deps::bad_dependencies_are_refused_and_change_nothing,
            deps::a_parent_retried_and_finished_again_counts_once,
        );
    };
    (@cases $new_db:expr; $($module:ident :: $case:ident),* $(,)?) => {
        $(
            #[test]
            fn $case() {
                $crate::$module::$case(&$new_db);
            }
        )*
    };
}
