//! Queue limits across real processes (issue "Scheduling", acceptance 2):
//! three worker processes of eight handlers each share one store; the
//! store's own rows are read continuously by another connection (an
//! operator's `sqlite3`/`psql`), and its event log is the record of when
//! each lease was taken. On SQLite and on PostgreSQL.

mod common;

use common::{workers, Peek};
use relay::{NewJob, Options, QueueLimits, RateLimit, Relay};
use relay_storetest::pg::PgServer;
use std::time::{Duration, Instant};

/// The most of `times` (sorted) within any `span` ms: `[t, t + span)`.
fn most_within(times: &[i64], span: i64) -> usize {
    let mut most = 0;
    let mut end = 0;
    for (start, t) in times.iter().enumerate() {
        while end < times.len() && times[end] < t + span {
            end += 1;
        }
        most = most.max(end - start);
    }
    most
}

/// The most jobs leased at once, rebuilt from the event log alone: each
/// "leased" event opens a lease, each "succeeded" closes one (at the same
/// millisecond, closes first: an ack committed before the lease that
/// counted it gone).
fn most_leased_by_the_events(mut events: Vec<(i64, String)>) -> i64 {
    events.sort_by_key(|(at, kind)| (*at, kind == "leased"));
    let (mut now, mut most) = (0i64, 0i64);
    for (_, kind) in &events {
        now += if kind == "leased" { 1 } else { -1 };
        most = most.max(now);
    }
    most
}

fn submit(relay: &Relay, n: usize) {
    let jobs = (0..n).map(|_| NewJob::new("q", "k", Vec::new())).collect();
    relay.submit_batch(jobs).unwrap();
}

fn max_leased_is_never_exceeded(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let limits = QueueLimits {
        max_leased_per_group: None,
        max_leased: Some(5),
        rate: None,
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    submit(&relay, 400);
    let mut peek = Peek::open(db);
    let children = workers(db, 3, 8, 15, 1_000);
    let deadline = Instant::now() + Duration::from_secs(120);
    let (mut samples, mut most) = (0u64, 0i64);
    loop {
        let leased = peek.count("queue = 'q' AND state = 'LEASED'");
        samples += 1;
        most = most.max(leased);
        assert!(
            leased <= 5,
            "{leased} jobs LEASED at once under max_leased 5 (sample {samples})"
        );
        if peek.count("queue = 'q' AND state = 'SUCCEEDED'") == 400 {
            break;
        }
        assert!(Instant::now() < deadline, "the workers did not finish in 120 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(children);
    assert_eq!(most, 5, "the limit was reached (else the test shows nothing)");
    assert!(samples > 50, "sampled continuously: {samples} samples");
    // The event log tells the same story: its times are in commit order
    // for the queue, so no sixth lease opens before an ack closed one.
    let events = peek.event_times("'leased', 'succeeded'");
    assert_eq!(events.len(), 800, "a lease and an ack for each job");
    let by_events = most_leased_by_the_events(events);
    assert!(
        by_events <= 5,
        "{by_events} jobs leased at once by the event log under max_leased 5"
    );
}

/// Three processes of eight handlers drain `jobs` jobs under `rate` for
/// ten seconds from the first lease. By the event log: no stretch of `k`
/// windows' length holds more than the documented `(k + 1) * limit`
/// leases (for one window and for ten seconds), and the first ten seconds
/// hold at least 80% of their share (the limit does not hold the workers
/// back much further, with room for three processes on a loaded machine).
fn a_rate_limit_holds_over_ten_seconds(db: &str, rate: RateLimit, jobs: usize) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let limits = QueueLimits {
        max_leased_per_group: None,
        max_leased: None,
        rate: Some(rate),
        poison_after: None,
    };
    relay.set_queue_limits("q", limits).unwrap();
    submit(&relay, jobs);
    let mut peek = Peek::open(db);
    let children = workers(db, 3, 8, 0, 1_000);
    // Until ten seconds after the first lease have passed in the leases
    // themselves: the window is the limit's, not the processes' start-up.
    let deadline = Instant::now() + Duration::from_secs(90);
    let times = loop {
        let times = peek.lease_times();
        let done = times
            .first()
            .is_some_and(|first| times.iter().any(|t| *t >= first + 10_000));
        if done || times.len() == jobs {
            break times;
        }
        assert!(Instant::now() < deadline, "ten seconds of leases not seen in 90 s");
        std::thread::sleep(Duration::from_millis(200));
    };
    drop(children);
    let per = i64::try_from(rate.per.as_millis()).unwrap();
    let limit = rate.limit as usize;
    let first = *times.first().expect("no job was leased");
    let in_ten = times.iter().filter(|t| **t < first + 10_000).count();
    let windows = (10_000 / per) as usize;
    let (least, bound) = (windows * limit * 8 / 10, (windows + 1) * limit);
    assert!(
        (least..=bound).contains(&in_ten),
        "{in_ten} leases in the first 10 s under {}/{per}ms (bound {bound}; {} in all)",
        rate.limit,
        times.len()
    );
    let ten = most_within(&times, 10_000);
    assert!(ten <= bound, "{ten} leases within 10 s (bound {bound})");
    let one = most_within(&times, per);
    assert!(
        one <= 2 * limit,
        "{one} leases within one window of {per} ms (bound {})",
        2 * limit
    );
}

fn fifty_a_second() -> RateLimit {
    RateLimit {
        limit: 50,
        per: Duration::from_secs(1),
    }
}

fn five_per_100ms() -> RateLimit {
    RateLimit {
        limit: 5,
        per: Duration::from_millis(100),
    }
}

#[test]
fn sqlite_max_leased_is_never_exceeded_by_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    max_leased_is_never_exceeded(dir.path().join("limits.db").to_str().unwrap());
}

#[test]
fn postgres_max_leased_is_never_exceeded_by_three_processes() {
    max_leased_is_never_exceeded(&PgServer::shared().new_database());
}

#[test]
fn sqlite_a_rate_limit_holds_across_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rate.db");
    a_rate_limit_holds_over_ten_seconds(db.to_str().unwrap(), fifty_a_second(), 1_000);
}

#[test]
fn postgres_a_rate_limit_holds_across_three_processes() {
    a_rate_limit_holds_over_ten_seconds(&PgServer::shared().new_database(), fifty_a_second(), 1_000);
}

#[test]
fn sqlite_a_short_rate_window_holds_across_three_processes() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("rate.db");
    a_rate_limit_holds_over_ten_seconds(db.to_str().unwrap(), five_per_100ms(), 800);
}

#[test]
fn postgres_a_short_rate_window_holds_across_three_processes() {
    a_rate_limit_holds_over_ten_seconds(&PgServer::shared().new_database(), five_per_100ms(), 800);
}
