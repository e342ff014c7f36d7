//! Groups across real processes (issue "What operators and their tenants
//! need", item 4): four worker processes of eight handlers share one store
//! holding 1,000 groups, one with 100,000 jobs submitted first and 999
//! with 10 each. Every small group's jobs are leased before the big
//! group's first 20,000 are; and under `max_leased_per_group = 2` no group
//! ever holds more than two leases, sampled by another connection (an
//! operator's `sqlite3`/`psql`) and rebuilt from the event log. On SQLite
//! and on PostgreSQL.

mod common;

use common::{workers, Peek};
use relay::{NewJob, Options, QueueLimits, Relay};
use relay_storetest::pg::PgServer;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// The big group's `big` jobs first, then `small` jobs of each of
/// `groups` other groups.
fn submit(relay: &Relay, big: usize, groups: usize, small: usize) {
    let job = |g: &str| NewJob::new("q", "k", Vec::new()).group(g);
    for start in (0..big).step_by(10_000) {
        let n = (big - start).min(10_000);
        relay.submit_batch((0..n).map(|_| job("big")).collect()).unwrap();
    }
    let all: Vec<NewJob> = (0..groups)
        .flat_map(|g| (0..small).map(move |_| g))
        .map(|g| job(&format!("small-{g}")))
        .collect();
    for chunk in all.chunks(10_000) {
        relay.submit_batch(chunk.to_vec()).unwrap();
    }
}

fn small_groups_come_before_the_big_one(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let started = Instant::now();
    submit(&relay, 100_000, 999, 10);
    eprintln!("submitted 109,990 jobs in {:?}", started.elapsed());
    let mut peek = Peek::open(db);
    let children = workers(db, 4, 8, 0, 30_000);
    let deadline = Instant::now() + Duration::from_secs(300);
    let not_waiting = "state NOT IN ('READY', 'SCHEDULED', 'RETRYING')";
    loop {
        let small = peek.count(&format!("grp <> 'big' AND {not_waiting}"));
        if small == 9_990 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{small} of the small groups' 9,990 jobs leased in 300 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    // Read after the last small job was leased: the big group's count can
    // only have grown since.
    let big = peek.count(&format!("grp = 'big' AND {not_waiting}"));
    drop(children);
    eprintln!("the big group had {big} jobs leased when the last small one was");
    assert!(
        big < 20_000,
        "the big group had {big} jobs leased before the 999 small groups' 9,990 were"
    );
    assert!(big > 0, "the big group was served too");
}

fn max_leased_per_group_is_never_exceeded(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let limits = QueueLimits {
        max_leased_per_group: Some(2),
        ..QueueLimits::default()
    };
    relay.set_queue_limits("q", limits).unwrap();
    // 4 x 8 handlers, far more than two a group: the limit binds.
    submit(&relay, 300, 30, 10);
    let total = 600;
    let mut peek = Peek::open(db);
    let children = workers(db, 4, 8, 10, 30_000);
    let deadline = Instant::now() + Duration::from_secs(180);
    let (mut samples, mut most) = (0u64, 0i64);
    loop {
        let per_group = peek.pairs("SELECT grp, count(*) FROM {jobs} WHERE state = 'LEASED' GROUP BY grp");
        samples += 1;
        for (group, n) in &per_group {
            most = most.max(*n);
            assert!(
                *n <= 2,
                "group {group} held {n} leases under max_leased_per_group 2 (sample {samples})"
            );
        }
        if peek.count("state = 'SUCCEEDED'") == total {
            break;
        }
        assert!(Instant::now() < deadline, "the workers did not finish in 180 s");
        std::thread::sleep(Duration::from_millis(2));
    }
    drop(children);
    assert_eq!(most, 2, "the limit was reached (else the test shows nothing)");
    assert!(samples > 50, "sampled continuously: {samples} samples");
    // The event log, group by group: no third lease opens before an ack
    // closed one (at one millisecond, the ack first).
    let events = peek.pairs(
        "SELECT j.grp || ' ' || e.kind, e.at FROM {events} e JOIN {jobs} j ON j.id = e.job_id \
         WHERE e.kind IN ('leased', 'succeeded')",
    );
    assert_eq!(events.len(), 2 * 600, "a lease and an ack for each job");
    let mut by_group: HashMap<String, Vec<(i64, bool)>> = HashMap::new();
    for (what, at) in events {
        let (group, kind) = what.rsplit_once(' ').unwrap();
        by_group
            .entry(group.to_owned())
            .or_default()
            .push((at, kind == "leased"));
    }
    for (group, mut evs) in by_group {
        evs.sort_unstable();
        let (mut now, mut top) = (0i64, 0i64);
        for (_, leased) in evs {
            now += if leased { 1 } else { -1 };
            top = top.max(now);
        }
        assert!(top <= 2, "group {group}: {top} leases at once by the event log");
    }
}

#[test]
fn sqlite_small_groups_come_before_the_big_one_across_four_processes() {
    let dir = tempfile::tempdir().unwrap();
    small_groups_come_before_the_big_one(dir.path().join("groups.db").to_str().unwrap());
}

#[test]
fn postgres_small_groups_come_before_the_big_one_across_four_processes() {
    small_groups_come_before_the_big_one(&PgServer::shared().new_database());
}

#[test]
fn sqlite_max_leased_per_group_is_never_exceeded_by_four_processes() {
    let dir = tempfile::tempdir().unwrap();
    max_leased_per_group_is_never_exceeded(dir.path().join("groups.db").to_str().unwrap());
}

#[test]
fn postgres_max_leased_per_group_is_never_exceeded_by_four_processes() {
    max_leased_per_group_is_never_exceeded(&PgServer::shared().new_database());
}
