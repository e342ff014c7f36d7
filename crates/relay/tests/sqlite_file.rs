//! What only the SQLite file store has: refusing files that are not Relay
//! databases, newer schemas, corrupt rows, and the settings durability
//! rests on.

use relay::{Error, JobId, JobState, LeaseRequest, NewJob, Relay};
use relay_store::StoreError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};

fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.db");
    (dir, path)
}

fn open_error(path: &Path) -> StoreError {
    match Relay::open(path) {
        Err(Error::Open(e)) => std::sync::Arc::try_unwrap(e).unwrap_or_else(|_| panic!("shared error")),
        other => panic!("expected an open error, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_untouched() {
    let (_dir, path) = temp_db();
    let bytes = b"this is my thesis, please do not overwrite it\n".repeat(100);
    std::fs::write(&path, &bytes).unwrap();
    let e = open_error(&path);
    assert!(matches!(e, StoreError::NotADatabase { .. }), "{e}");
    assert!(e.to_string().contains("not an SQLite file"), "{e}");
    assert_eq!(std::fs::read(&path).unwrap(), bytes);
    assert!(!path.with_extension("db-wal").exists());
}

#[test]
fn another_applications_database_is_refused_untouched() {
    let (_dir, path) = temp_db();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL); INSERT INTO invoices VALUES (1, 9.5);",
    )
    .unwrap();
    drop(conn);
    let before = std::fs::read(&path).unwrap();
    let e = open_error(&path);
    assert!(matches!(e, StoreError::NotADatabase { .. }), "{e}");
    // Not a byte changed: not even the journal mode in its header.
    assert_eq!(std::fs::read(&path).unwrap(), before);
    let conn = Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row("SELECT count(*) FROM sqlite_schema", [], |r| r.get(0))
        .unwrap();
    assert_eq!(tables, 1, "no Relay tables were added");
}

#[test]
fn a_newer_schema_is_refused() {
    let (_dir, path) = temp_db();
    drop(Relay::open(&path).unwrap());
    Connection::open(&path)
        .unwrap()
        .pragma_update(None, "user_version", 99)
        .unwrap();
    let e = open_error(&path);
    assert!(
        matches!(
            e,
            StoreError::SchemaTooNew {
                found: 99,
                supported: relay_sqlite::SCHEMA_VERSION
            }
        ),
        "{e}"
    );
    assert!(e.to_string().contains("upgrade Relay"));
}

/// A file written by an earlier Relay (schema version 1, before queues
/// had settings) is migrated on open: its jobs stay, and pause works.
#[test]
fn a_version_1_file_is_migrated_and_keeps_its_jobs() {
    let (_dir, path) = temp_db();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(include_str!("../../relay-sqlite/migrations/0001_init.sql"))
        .unwrap();
    conn.execute_batch(
        "INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, lease_token)
         VALUES ('q', 'k', x'01', 1, 'READY', 0, 3, 0, 0, 0);
         PRAGMA user_version = 1; PRAGMA application_id = 1380273241;",
    )
    .unwrap();
    drop(conn);
    let relay = Relay::open(&path).unwrap();
    assert_eq!(relay.get(relay::JobId(1)).unwrap().payload, [1]);
    relay.pause("q").unwrap();
    assert!(relay.lease(relay::LeaseRequest::new(["q"])).unwrap().is_empty());
    relay.resume("q").unwrap();
    assert_eq!(relay.lease(relay::LeaseRequest::new(["q"])).unwrap().len(), 1);
    drop(relay);
    let version: i64 = Connection::open(&path)
        .unwrap()
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .unwrap();
    assert_eq!(version, relay_sqlite::SCHEMA_VERSION);
}

/// A file of schema 11 kept delayed and backing-off jobs READY: version
/// 12 moves those not yet due to SCHEDULED or RETRYING (by `last_error`),
/// and their counts with them; a due one stays READY.
#[test]
fn a_version_11_file_tells_scheduled_and_retrying_jobs_apart() {
    let (_dir, path) = temp_db();
    let conn = Connection::open(&path).unwrap();
    for m in &relay_sqlite::MIGRATIONS[..11] {
        conn.execute_batch(m).unwrap();
    }
    let later = 4_000_000_000_000_i64; // in 2096
    conn.execute_batch(&format!(
        "INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, lease_token, last_error)
         VALUES ('q', 'k', x'', 1, 'READY', 0, 3, 0, 0, 0, NULL),
                ('q', 'k', x'', 1, 'READY', 0, 3, {later}, 0, 0, NULL),
                ('q', 'k', x'', 1, 'READY', 1, 3, {later}, 0, 1, 'boom'),
                ('r', 'k', x'', 1, 'READY', 0, 3, {later}, 0, 0, NULL),
                ('r', 'k', x'', 1, 'SUCCEEDED', 1, 3, 0, 0, 1, NULL);
         UPDATE jobs SET finished_at = 0 WHERE state = 'SUCCEEDED';
         INSERT INTO job_counts (queue, state, n) VALUES ('q', 'READY', 3), ('r', 'READY', 1), ('r', 'SUCCEEDED', 1);
         PRAGMA user_version = 11; PRAGMA application_id = 1380273241;"
    ))
    .unwrap();
    drop(conn);
    let relay = Relay::open(&path).unwrap();
    let states: Vec<JobState> = (1..=5).map(|id| relay.get(JobId(id)).unwrap().state()).collect();
    assert_eq!(
        states,
        [
            JobState::Ready,
            JobState::Scheduled,
            JobState::Retrying,
            JobState::Scheduled,
            JobState::Succeeded
        ]
    );
    let stats = relay.stats().unwrap();
    let counts = |q: &str| -> Vec<(JobState, u64)> {
        stats.queues[q]
            .counts
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(s, n)| (*s, *n))
            .collect()
    };
    assert_eq!(
        counts("q"),
        [(JobState::Ready, 1), (JobState::Scheduled, 1), (JobState::Retrying, 1)]
    );
    assert_eq!(counts("r"), [(JobState::Scheduled, 1), (JobState::Succeeded, 1)]);
    let leased = relay.lease(LeaseRequest::new(["q", "r"]).max(10)).unwrap();
    assert_eq!(leased.iter().map(|l| l.id).collect::<Vec<_>>(), [JobId(1)]);
}

/// A file of schema 13 had every grouped READY job in the claim's index:
/// version 14 keeps only each group's first of a class there (its head),
/// and the claim reads the rest of each line behind it, so every job is
/// still leased, in turn order.
#[test]
fn a_version_13_file_keeps_its_groups_lines() {
    let (_dir, path) = temp_db();
    let conn = Connection::open(&path).unwrap();
    for m in &relay_sqlite::MIGRATIONS[..13] {
        conn.execute_batch(m).unwrap();
    }
    // Two groups of three READY jobs (turns given by the version-13
    // triggers: a0 b0 a1 b1 a2 b2), written in group order.
    conn.execute_batch(
        "INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at, created_at, lease_token, grp)
         VALUES ('q', 'a0', x'', 1, 'READY', 0, 3, 0, 0, 0, 'a'), ('q', 'a1', x'', 1, 'READY', 0, 3, 0, 0, 0, 'a'),
                ('q', 'a2', x'', 1, 'READY', 0, 3, 0, 0, 0, 'a'), ('q', 'b0', x'', 1, 'READY', 0, 3, 0, 0, 0, 'b'),
                ('q', 'b1', x'', 1, 'READY', 0, 3, 0, 0, 0, 'b'), ('q', 'b2', x'', 1, 'READY', 0, 3, 0, 0, 0, 'b');
         INSERT INTO job_counts (queue, state, n) VALUES ('q', 'READY', 6);
         PRAGMA user_version = 13; PRAGMA application_id = 1380273241;",
    )
    .unwrap();
    drop(conn);
    let relay = Relay::open(&path).unwrap();
    let heads: Vec<String> = {
        let conn = Connection::open(&path).unwrap();
        let mut st = conn
            .prepare("SELECT kind FROM jobs WHERE state = 'READY' AND head = 1 ORDER BY kind")
            .unwrap();
        st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
    };
    assert_eq!(heads, ["a0", "b0"]);
    let mut kinds = Vec::new();
    for _ in 0..6 {
        let got = relay.lease(LeaseRequest::new(["q"])).unwrap();
        kinds.extend(got.into_iter().map(|l| l.kind));
    }
    assert_eq!(kinds, ["a0", "b0", "a1", "b1", "a2", "b2"]);
}

/// Each (queue, priority, group) with READY jobs has exactly one head, its
/// first READY job by (turn, id); the offenders, if any.
fn heads_wrong(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn
        .prepare(
            "SELECT queue || '/' || priority || '/' || grp || ': ' || sum(head) || ' heads, first ' ||
                    (SELECT f.id FROM jobs f WHERE f.state = 'READY' AND f.queue = j.queue
                       AND f.priority = j.priority AND f.grp = j.grp ORDER BY f.turn, f.id LIMIT 1) ||
                    ', head ' || coalesce(max(CASE WHEN head = 1 THEN id END), 'none')
             FROM jobs j WHERE state = 'READY' AND grp IS NOT NULL GROUP BY queue, priority, grp
             HAVING sum(head) <> 1 OR max(CASE WHEN head = 1 THEN id END) <>
                    (SELECT f.id FROM jobs f WHERE f.state = 'READY' AND f.queue = j.queue
                       AND f.priority = j.priority AND f.grp = j.grp ORDER BY f.turn, f.id LIMIT 1)",
        )
        .unwrap();
    st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
}

/// Another program that copies a READY grouped row in with its turn (and
/// no head flag, or one it should not have), or moves a READY job to
/// another priority or group, leaves every group with exactly one head,
/// its first job: none of those jobs is left where no claim finds it.
#[test]
fn another_programs_rows_leave_every_group_one_head() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let sub = |g: &str, kind: &str| relay.submit(NewJob::new("q", kind, Vec::new()).group(g)).unwrap();
    sub("a", "a1");
    let b1 = sub("b", "b1");
    sub("b", "b2");
    let d1 = sub("d", "d1");
    sub("d", "d2");
    assert_eq!(heads_wrong(&path), Vec::<String>::new());
    let conn = Connection::open(&path).unwrap();
    let insert = "INSERT INTO jobs (queue, kind, payload, priority, state, attempts, max_attempts, ready_at,
                                    created_at, lease_token, grp, turn, head)
                  VALUES ('q', ?1, x'', 1, 'READY', 0, 3, 0, 0, 0, ?2, ?3, ?4)";
    // Before group a's job, without the head flag; alone in a group of
    // its own; a second head in group b.
    conn.execute(insert, rusqlite::params!["a0", "a", -5, 0]).unwrap();
    conn.execute(insert, rusqlite::params!["c0", "c", 7, 0]).unwrap();
    conn.execute(insert, rusqlite::params!["b9", "b", 99, 1]).unwrap();
    // First in group d, rightly heading it: d's old head gives way.
    conn.execute(insert, rusqlite::params!["d0", "d", -3, 1]).unwrap();
    assert_eq!(heads_wrong(&path), Vec::<String>::new(), "after the inserts");
    // b's head moved to another class; d's head to another group; one of
    // d's jobs out of every group.
    conn.execute("UPDATE jobs SET priority = 3 WHERE id = ?1", [b1.0])
        .unwrap();
    conn.execute("UPDATE jobs SET grp = 'e' WHERE id = ?1", [d1.0]).unwrap();
    assert_eq!(heads_wrong(&path), Vec::<String>::new(), "after the moves");
    conn.execute("UPDATE jobs SET grp = NULL WHERE kind = 'd2'", [])
        .unwrap();
    assert_eq!(heads_wrong(&path), Vec::<String>::new(), "after leaving every group");
    let n: i64 = conn
        .query_row("SELECT count(*) FROM jobs WHERE grp IS NULL AND head = 1", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(n, 0, "a job in no group heads nothing");
    conn.execute(
        "UPDATE job_counts SET n = n + 4 WHERE queue = 'q' AND state = 'READY'",
        [],
    )
    .unwrap();
    drop(conn);
    let mut kinds = Vec::new();
    for _ in 0..20 {
        let got = relay.lease(LeaseRequest::new(["q"]).max(3)).unwrap();
        kinds.extend(got.into_iter().map(|l| l.kind));
    }
    kinds.sort();
    assert_eq!(
        kinds,
        ["a0", "a1", "b1", "b2", "b9", "c0", "d0", "d1", "d2"],
        "every job claimed"
    );
}

#[test]
fn durability_settings_are_in_force() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let conn = Connection::open(&path).unwrap();
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
    assert_eq!(mode, "wal");
    assert!(path.with_extension("db-wal").exists());
    // A second Relay on the same file migrates nothing and sees the job.
    let second = Relay::open(&path).unwrap();
    assert_eq!(
        second
            .list(&relay::JobFilter {
                limit: 10,
                ..Default::default()
            })
            .unwrap()
            .len(),
        1
    );
}

/// Submits four jobs and corrupts each in its own way, by hand.
fn corrupted() -> (tempfile::TempDir, PathBuf, Relay, Vec<JobId>) {
    let (dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let ids: Vec<JobId> = (0..5)
        .map(|_| relay.submit(NewJob::new("q", "k", Vec::new())).unwrap())
        .collect();
    let conn = Connection::open(&path).unwrap();
    let corrupt = [
        "UPDATE jobs SET state = 'WEIRD' WHERE id = ?1",
        "UPDATE jobs SET priority = 7 WHERE id = ?1",
        "UPDATE jobs SET state = 'LEASED' WHERE id = ?1", // LEASED without a lease
        "UPDATE jobs SET ready_at = 'soon' WHERE id = ?1",
        "UPDATE jobs SET max_attempts = 0 WHERE id = ?1",
    ];
    for (sql, id) in corrupt.iter().zip(&ids) {
        conn.execute(sql, [id.0]).unwrap();
    }
    (dir, path, relay, ids)
}

fn raw_row(path: &Path, id: JobId) -> String {
    let conn = Connection::open(path).unwrap();
    conn.query_row("SELECT quote(state)||quote(priority)||quote(attempts)||quote(ready_at)||quote(lease_token) FROM jobs WHERE id = ?1", [id.0], |r| r.get(0))
        .unwrap()
}

#[test]
fn corrupt_rows_are_typed_errors_naming_the_job_and_change_nothing() {
    let (_dir, path, relay, ids) = corrupted();
    let expect = [
        "unknown state \"WEIRD\"",
        "priority: 7 is outside 0-3",
        "LEASED job without a lease",
        "ready_at: expected an integer",
        "max_attempts: 0",
    ];
    for (id, want) in ids.iter().zip(expect) {
        let before = raw_row(&path, *id);
        match relay.get(*id) {
            Err(Error::Corrupt { job, reason }) => {
                assert_eq!(job, Some(*id));
                assert!(reason.contains(want), "job {id}: {reason}");
            }
            other => panic!("job {id}: expected Corrupt, got {other:?}"),
        }
        for r in [relay.cancel(*id), relay.retry(*id)] {
            assert!(
                matches!(r, Err(Error::Corrupt { job: Some(j), .. }) if j == *id),
                "{r:?}"
            );
        }
        assert_eq!(raw_row(&path, *id), before, "job {id} was changed");
    }
    // The claim meets the corrupt max_attempts row (READY, due): it refuses
    // with the job named, and leases nothing.
    let e = relay.lease(LeaseRequest::new(["q"])).unwrap_err();
    assert!(matches!(e, Error::Corrupt { job: Some(j), .. } if j == ids[4]), "{e:?}");
    // Stats come from the counts the writers keep (a row edited by hand is
    // counted as Relay last wrote it), so a corrupt row does not stop them.
    assert_eq!(relay.stats().unwrap().queues["q"].counts[&JobState::Ready], 5);
    // An operator can always delete a corrupt job, and the queue flows again.
    for id in &ids {
        relay.delete(*id).unwrap();
    }
    // Deleting a row whose state no writer wrote counts nothing.
    assert!(relay.stats().is_ok());
    let ok = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap()[0].id, ok);
    assert_eq!(relay.get(ok).unwrap().state(), JobState::Leased);
}

/// A full disk (here: the database capped by `max_page_count`) is a typed
/// error, the failed call changes nothing, and what is stored stays readable
/// and usable once space is back.
#[test]
fn a_full_disk_is_a_typed_error_and_changes_nothing() {
    use relay_sqlite::{Settings, SqliteBackend};
    use std::sync::Arc;
    let (_dir, path) = temp_db();
    drop(Relay::open(&path).unwrap()); // create the schema first
    let settings = Settings {
        max_page_count: Some(64),
        ..Settings::default()
    };
    let backend = Arc::new(SqliteBackend::file(&path).with_settings(settings));
    let relay = Relay::with_backend(backend, relay::Options::default()).unwrap();
    let first = relay.submit(NewJob::new("q", "k", vec![1u8; 100])).unwrap();
    let mut stored = 1;
    let err = loop {
        let batch = (0..20).map(|_| NewJob::new("q", "k", vec![7u8; 2000])).collect();
        match relay.submit_batch(batch) {
            Ok(ids) => stored += ids.len(),
            Err(e) => break e,
        }
        assert!(stored < 10_000, "the page cap never bit");
    };
    match &err {
        Error::Storage(e) => assert!(matches!(**e, StoreError::Full { .. }), "{e:?}"),
        other => panic!("expected Storage(Full), got {other:?}"),
    }
    assert!(err.to_string().contains("disk full"), "{err}");
    let all = relay
        .list(&relay::JobFilter {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(all.len(), stored, "the failed batch left nothing behind");
    // Small writes that fit still work; after reopening without the cap, everything does.
    assert_eq!(relay.get(first).unwrap().state(), JobState::Ready);
    drop(relay);
    let relay = Relay::open(&path).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.ack(l.id, l.token, None).unwrap();
    relay
        .submit_batch((0..20).map(|_| NewJob::new("q", "k", vec![7u8; 2000])).collect())
        .unwrap();
}

/// An operation that fails after it has written (here: a two-job lease that
/// claims a good job, then meets a corrupt one) must leave nothing behind:
/// the engine rolls the batch back and applies it again without it.
#[test]
fn an_operation_failing_after_it_wrote_leaves_nothing_behind() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let good = relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
    let bad = relay.submit(NewJob::new("q", "k", Vec::new()).priority(3)).unwrap();
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE jobs SET max_attempts = 0 WHERE id = ?1", [bad.0])
        .unwrap();
    let e = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap_err();
    assert!(matches!(e, Error::Corrupt { job: Some(j), .. } if j == bad), "{e:?}");
    let job = relay.get(good).unwrap();
    assert_eq!(
        (job.state(), job.status.attempts, job.status.last_token.0),
        (JobState::Ready, 0, 0)
    );
    let kinds: Vec<String> = relay.events(good).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted"], "the rolled-back lease left no event");
    // Other work goes on.
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(l.id, good);
}

fn manual_clock() -> (std::sync::Arc<relay::ManualClock>, relay::Options) {
    let clock = std::sync::Arc::new(relay::ManualClock::new(relay::Timestamp::from_millis(
        1_700_000_000_000,
    )));
    let options = relay::Options {
        clock: clock.clone(),
        reap_interval: std::time::Duration::from_secs(3600),
        ..relay::Options::default()
    };
    (clock, options)
}

/// Regression: the batch's clock was read before `BEGIN IMMEDIATE`, which
/// may wait up to the busy timeout for another process's lock: an ack that
/// waited there past its lease's expiry was still accepted.
#[test]
fn an_ack_that_waited_for_the_write_lock_is_judged_by_when_it_got_it() {
    use std::time::Duration;
    let (_dir, path) = temp_db();
    let (clock, options) = manual_clock();
    let relay = Relay::open_with(&path, options).unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let job = relay
        .lease(LeaseRequest::new(["q"]).lease_for(Duration::from_secs(10)))
        .unwrap()
        .remove(0);
    // Another process holds the write lock; the ack waits in BEGIN.
    let mut blocker = Connection::open(&path).unwrap();
    let tx = blocker
        .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let acker = relay.clone();
    let ack = std::thread::spawn(move || acker.ack(job.id, job.token, None));
    std::thread::sleep(Duration::from_millis(300));
    // The lease expires while the ack waits for the lock.
    clock.advance(Duration::from_secs(20));
    tx.rollback().unwrap();
    drop(blocker);
    let r = ack.join().unwrap();
    assert!(
        matches!(r, Err(Error::LeaseLost { id }) if id == job.id),
        "an ack 10 s past its lease was {r:?}"
    );
    assert_ne!(relay.get(job.id).unwrap().state(), JobState::Succeeded);
}

/// Regression: a corrupt LEASED row whose lease had expired stopped every
/// reclaim behind it (it is first in expiry order every time). It is now
/// reported and passed over.
#[test]
fn the_reaper_passes_over_a_corrupt_row() {
    use std::time::Duration;
    let (_dir, path) = temp_db();
    let (clock, options) = manual_clock();
    let relay = Relay::open_with(&path, options).unwrap();
    for _ in 0..3 {
        relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    }
    let leased = relay
        .lease(LeaseRequest::new(["q"]).max(3).lease_for(Duration::from_secs(10)))
        .unwrap();
    let (bad, good) = (leased[0].id, [leased[1].id, leased[2].id]);
    // The first to expire breaks an invariant: a LEASED row with no holder.
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE jobs SET leased_by = NULL WHERE id = ?1", [bad.0])
        .unwrap();
    let before = raw_row(&path, bad);
    clock.advance(Duration::from_secs(60));
    assert_eq!(relay.reap_expired().unwrap(), 2);
    for id in good {
        assert_eq!(
            relay.get(id).unwrap().state(),
            JobState::Ready,
            "job {id} was not reclaimed"
        );
    }
    assert!(matches!(relay.get(bad), Err(Error::Corrupt { job: Some(j), .. }) if j == bad));
    assert_eq!(raw_row(&path, bad), before, "the corrupt row was changed");
    // Claims (which reap first) go on, and the operator can delete it.
    assert_eq!(relay.lease(LeaseRequest::new(["q"]).max(3)).unwrap().len(), 2);
    relay.delete(bad).unwrap();
}

/// A claim that fails part-way (its second job's row is corrupt) leaves
/// nothing behind in its batch: the job it took first is READY again for
/// the next claim of the same batch, and is written leased only to that
/// claim. Regression guard for the plan's undo: without it the first job
/// stayed leased to a claim that failed.
#[test]
fn a_claim_that_fails_part_way_gives_back_what_it_took_in_its_batch() {
    use std::future::Future;
    use std::task::{Context, Poll, Waker};
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let good = relay.submit(NewJob::new("q", "k", b"good".to_vec())).unwrap();
    let bad = relay.submit(NewJob::new("q", "k", b"bad".to_vec())).unwrap();
    // The claim's candidate columns stay sound; the rest of the row does not.
    Connection::open(&path)
        .unwrap()
        .execute("UPDATE jobs SET created_at = 'yesterday' WHERE id = ?1", [bad.0])
        .unwrap();
    let r = relay.to_async();
    let hold = relay.hold_writer().unwrap();
    let (r1, r2) = (r.clone(), r.clone());
    let mut both = Box::pin(async move { r1.lease(LeaseRequest::new(["q"]).max(2)).await });
    let mut one = Box::pin(async move { r2.lease(LeaseRequest::new(["q"]).max(1)).await });
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(both.as_mut().poll(&mut cx), Poll::Pending));
    assert!(matches!(one.as_mut().poll(&mut cx), Poll::Pending));
    drop(hold);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let e = rt.block_on(both).unwrap_err();
    assert!(matches!(e, Error::Corrupt { job: Some(j), .. } if j == bad), "{e:?}");
    let leased = rt.block_on(one).unwrap();
    assert_eq!(leased.len(), 1, "the first claim's job was not given back");
    assert_eq!((leased[0].id, leased[0].attempt), (good, 1));
    let job = relay.get(good).unwrap();
    assert_eq!(
        job.status.last_token, leased[0].token,
        "leased once, to the claim that succeeded"
    );
    let kinds: Vec<String> = relay.events(good).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds, ["submitted", "leased"]);
}

/// A scheduler pass that wrote a tick's job, with no caller in its batch,
/// is a commit like any other: counted, and (split commit) fsynced before
/// this process reads past it.
#[test]
fn the_schedulers_own_commit_is_counted_and_synced() {
    let (_dir, path) = temp_db();
    let clock = std::sync::Arc::new(relay::ManualClock::new(relay::Timestamp::from_millis(
        1_700_000_000_000,
    )));
    let options = relay::Options {
        clock: clock.clone(),
        ..relay::Options::default()
    };
    let relay = Relay::open_with(&path, options).unwrap();
    relay
        .add_schedule(relay::NewSchedule::every(
            "tick",
            std::time::Duration::from_secs(60),
            NewJob::new("q", "k", Vec::new()),
        ))
        .unwrap();
    let before = relay.metrics();
    clock.advance(std::time::Duration::from_secs(61));
    // The idle writer looks about once a second (real time).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while relay
        .stats()
        .unwrap()
        .queues
        .get("q")
        .is_none_or(|q| q.counts[&JobState::Ready] == 0)
    {
        assert!(std::time::Instant::now() < deadline, "the scheduler did not run");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let m = relay.metrics();
        if m.commits > before.commits && m.syncs > before.syncs {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "not counted or synced: {before:?} -> {m:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A queue's settings row that does not decode holds that queue (as if
/// paused) and nothing else; resuming writes it whole again. A schedule row
/// that does not decode is skipped by the scheduler, named by the listing,
/// and can be removed.
#[test]
fn corrupt_queue_and_schedule_rows_fail_alone_and_can_be_repaired() {
    let (_dir, path) = temp_db();
    let options = relay::Options {
        scheduler: false,
        ..relay::Options::default()
    };
    let relay = Relay::open_with(&path, options).unwrap();
    relay
        .set_queue_limits(
            "q",
            relay::QueueLimits {
                max_leased_per_group: None,
                max_leased: Some(3),
                rate: None,
                poison_after: None,
            },
        )
        .unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    relay
        .add_schedule(relay::NewSchedule::every(
            "s",
            std::time::Duration::from_secs(1),
            NewJob::new("q", "k", Vec::new()),
        ))
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute_batch(
        "UPDATE queues SET max_leased = -3 WHERE name = 'q';
         UPDATE schedules SET cron = 'not a cron', every_ms = NULL WHERE name = 's';",
    )
    .unwrap();
    // The held queue gives nothing; the other queue of the same call does.
    let got = relay.lease(LeaseRequest::new(["q", "other"]).max(5)).unwrap();
    assert_eq!(got.iter().map(|l| l.queue.as_str()).collect::<Vec<_>>(), ["other"]);
    assert!(relay.stats().unwrap().queues["q"].paused);
    // The schedule: skipped by the scheduler, named by the listing.
    std::thread::sleep(std::time::Duration::from_millis(1100));
    assert_eq!(relay.run_schedules().unwrap(), 0);
    match relay.schedules() {
        Err(Error::Corrupt { reason, .. }) => assert!(reason.contains("schedule s"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // Repaired: resume writes the queue's row whole; remove takes the schedule.
    relay.resume("q").unwrap();
    assert_eq!(relay.lease(LeaseRequest::new(["q"])).unwrap().len(), 1);
    relay.remove_schedule("s").unwrap();
    assert!(relay.schedules().unwrap().is_empty());
}

/// A dependency edge hand-edited into something that does not decode (a
/// child id that is text) fails neither the batch that reads it nor the
/// ack of its parent: it is reported and passed over; the parent's other
/// dependents are told, and a WAITING job hand-edited to wait for nothing
/// is corrupt and fails alone.
#[test]
fn a_corrupt_dependency_edge_fails_neither_its_batch_nor_its_parent() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let parent = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let child = relay
        .submit(NewJob::new("c", "k", Vec::new()).depends_on([parent]))
        .unwrap();
    let waiting = relay
        .submit(NewJob::new("c", "k", Vec::new()).depends_on([parent]))
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "INSERT INTO job_deps (parent, child, on_failure) VALUES (?1, 'abc', 'cancel')",
        [parent.0],
    )
    .unwrap();
    // The CHECK keeps what a child does on failure to the two it can be.
    assert!(conn
        .execute(
            "INSERT INTO job_deps (parent, child, on_failure) VALUES (?1, 99, 'maybe')",
            [parent.0]
        )
        .is_err());
    // A count no row can hold (a WAITING job waiting on none is a sleeper,
    // issue 40, and no longer corrupt).
    conn.execute("UPDATE jobs SET waiting_on = -1 WHERE id = ?1", [waiting.0])
        .unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    relay.ack(parent, l.token, None).unwrap();
    assert_eq!(relay.get(parent).unwrap().state(), JobState::Succeeded);
    assert_eq!(relay.get(child).unwrap().state(), JobState::Ready);
    assert!(matches!(relay.get(waiting), Err(Error::Corrupt { job: Some(j), .. }) if j == waiting));
    // The spent edges are gone, the corrupt one too.
    let left: i64 = conn
        .query_row("SELECT count(*) FROM job_deps WHERE parent = ?1", [parent.0], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(left, 0);
}

/// A deleted job's tag rows go with it, and a pruned one's: on Relay's own
/// writer, which runs no triggers, its statements delete them (on other
/// connections the `job_tags_delete` trigger does), so no tag row is left
/// naming a job that is gone.
#[test]
fn a_deleted_or_pruned_jobs_tags_go_with_it() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let tagged = |kind: &str| {
        relay
            .submit(NewJob::new("q", kind, Vec::new()).tags(["billing", "eu"]))
            .unwrap()
    };
    let deleted = tagged("deleted");
    let pruned = tagged("pruned");
    let kept = tagged("kept");
    relay.delete(deleted).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(l.id, pruned);
    relay.ack(l.id, l.token, None).unwrap();
    relay
        .set_retention(
            "q",
            relay::Retention {
                succeeded: Some(relay::Keep::For(std::time::Duration::ZERO)),
                ..relay::Retention::default()
            },
        )
        .unwrap();
    assert_eq!(relay.prune().unwrap(), 1);
    let conn = Connection::open(&path).unwrap();
    let mut st = conn
        .prepare("SELECT DISTINCT job_id FROM job_tags ORDER BY job_id")
        .unwrap();
    let left: Vec<i64> = st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect();
    assert_eq!(left, [kept.0], "tag rows of jobs that are gone");
}

/// A READY job whose group, head flag and tags were edited by hand into
/// values of the wrong kind can still be deleted: what its group's head
/// and its tags need is read loosely, and left undone when unreadable.
#[test]
fn a_hand_edited_grouped_job_can_still_be_deleted() {
    let (_dir, path) = temp_db();
    let relay = Relay::open(&path).unwrap();
    let id = relay
        .submit(NewJob::new("q", "k", Vec::new()).group("g").tags(["t"]))
        .unwrap();
    let conn = Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE jobs SET grp = x'00ff', head = 'x', tags = 'not json' WHERE id = ?1",
        [id.0],
    )
    .unwrap();
    relay.delete(id).unwrap();
    assert!(matches!(relay.get(id), Err(Error::NotFound { .. })));
}
