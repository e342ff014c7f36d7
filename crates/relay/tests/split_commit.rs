//! The split commit (ARCHITECTURE.md, "Split commit"): SQLite's `COMMIT`
//! only writes the WAL and the engine fsyncs it afterwards, off the
//! writer's path. These tests run the real engine on a real SQLite file
//! whose syncer is wrapped in a gate the test opens and closes, and check
//! what the split must never break: nobody is answered, and no read of this
//! process returns, before the fsync that covers the change; the writer
//! keeps applying while an fsync is pending; a failed fsync answers "maybe
//! applied" and stops the Relay.

use relay::{Error, NewJob, Options, Relay};
use relay_core::{Candidate, Job, JobId, JobStatus, QueueSettings, Schedule, Timestamp};
use relay_sqlite::SqliteBackend;
use relay_store::{
    Backend, Changes, CommitFailed, Prefetch, Prefetched, ReadyRow, StatusRead, Store, StoreError, StoreReader, Syncer,
    WriterStore,
};
use rusqlite::{Connection, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::Duration;

#[derive(Default)]
struct GateState {
    /// Syncs allowed through before the gate closes again.
    permits: u64,
    /// Syncs waiting at the gate now.
    waiting: u32,
    /// Syncs that went through.
    passed: u32,
    /// Fail every sync instead of waiting.
    fail: bool,
    /// Fail this many of the next syncs, then wait for permits again (how
    /// Linux reports a failed writeback: once).
    failures: u64,
    /// Transactions the writer has begun (counted as `begin` is entered).
    begins: u64,
    /// Claim candidates the store returned (every page of every class).
    candidates: u64,
    /// Groups whose lease counts the engine asked the store for.
    groups_counted: u64,
}

/// A syncer that waits for the test's permission, then does the real fsync.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

impl Gate {
    fn release(&self, n: u64) {
        self.state.lock().unwrap().permits += n;
        self.changed.notify_all();
    }

    fn fail_next(&self, n: u64) {
        self.state.lock().unwrap().failures += n;
        self.changed.notify_all();
    }

    fn fail_from_now_on(&self) {
        self.state.lock().unwrap().fail = true;
        self.changed.notify_all();
    }

    fn waiting(&self) -> u32 {
        self.state.lock().unwrap().waiting
    }

    fn passed(&self) -> u32 {
        self.state.lock().unwrap().passed
    }

    fn begins(&self) -> u64 {
        self.state.lock().unwrap().begins
    }

    fn candidates(&self) -> u64 {
        self.state.lock().unwrap().candidates
    }

    fn groups_counted(&self) -> u64 {
        self.state.lock().unwrap().groups_counted
    }

    /// Waits (up to 30 s) until the writer has begun `n` transactions.
    fn wait_for_begins(&self, n: u64) {
        self.wait_until(|s| s.begins >= n, "the writer began no transaction");
    }

    /// Waits (up to 30 s) until `n` syncs are held at the gate.
    fn wait_for_waiters(&self, n: u32) {
        self.wait_until(|s| s.waiting >= n, "no sync reached the gate");
    }

    fn wait_until(&self, done: impl Fn(&GateState) -> bool, otherwise: &str) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let mut s = self.state.lock().unwrap();
        while !done(&s) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            assert!(!left.is_zero(), "{otherwise}");
            s = self.changed.wait_timeout(s, left).unwrap().0;
        }
    }
}

struct GatedSyncer {
    inner: Arc<dyn Syncer>,
    gate: Arc<Gate>,
}

impl Syncer for GatedSyncer {
    fn sync(&self) -> Result<(), StoreError> {
        let mut s = self.gate.state.lock().unwrap();
        s.waiting += 1;
        self.gate.changed.notify_all();
        while s.permits == 0 && !s.fail && s.failures == 0 {
            s = self.gate.changed.wait(s).unwrap();
        }
        s.waiting -= 1;
        if s.failures > 0 {
            s.failures -= 1;
            return Err(StoreError::Io {
                message: "fsync of the WAL failed once (injected by the test)".into(),
                source: "EIO".into(),
            });
        }
        if s.fail {
            return Err(StoreError::Io {
                message: "fsync of the WAL failed (injected by the test)".into(),
                source: "EIO".into(),
            });
        }
        s.permits -= 1;
        s.passed += 1;
        drop(s);
        self.inner.sync()
    }
}

/// The SQLite store with its syncer behind the gate; everything else is
/// passed through untouched (every method, defaults included, so that the
/// engine takes the same paths as on the store itself).
struct GatedStore {
    inner: Box<WriterStore>,
    syncer: Arc<dyn Syncer>,
    gate: Arc<Gate>,
}

impl Store for GatedStore {
    fn begin(&mut self) -> Result<(), StoreError> {
        self.gate.state.lock().unwrap().begins += 1;
        self.gate.changed.notify_all();
        self.inner.begin()
    }
    fn commit(&mut self) -> Result<(), StoreError> {
        self.inner.commit()
    }
    fn rollback(&mut self) -> Result<(), StoreError> {
        self.inner.rollback()
    }
    fn behaviour(&self) -> relay_store::Behaviour {
        relay_store::Behaviour {
            applies_unread: false,
            ..self.inner.behaviour()
        }
    }
    fn syncer(&self) -> Option<Arc<dyn Syncer>> {
        Some(Arc::clone(&self.syncer))
    }
    fn caller_may_commit(&self) -> bool {
        self.inner.caller_may_commit()
    }
    fn job_ids(&mut self, n: usize) -> Result<Vec<JobId>, StoreError> {
        self.inner.job_ids(n)
    }
    fn job_find_active_by_key(&mut self, key: &str) -> Result<Option<JobId>, StoreError> {
        self.inner.job_find_active_by_key(key)
    }
    fn job_unique_key(&mut self, id: JobId) -> Result<Option<String>, StoreError> {
        self.inner.job_unique_key(id)
    }
    fn job_get(&mut self, id: JobId) -> Result<Option<Job>, StoreError> {
        self.inner.job_get(id)
    }
    fn job_get_status(&mut self, id: JobId) -> Result<Option<JobStatus>, StoreError> {
        self.inner.job_get_status(id)
    }
    fn job_get_statuses(&mut self, ids: &[JobId]) -> Result<Vec<StatusRead>, StoreError> {
        self.inner.job_get_statuses(ids)
    }
    fn prefetch(&mut self, p: &Prefetch<'_>) -> Result<Prefetched, StoreError> {
        self.inner.prefetch(p)
    }
    fn queue_settings(&mut self, names: &[&str]) -> Result<Vec<(String, QueueSettings)>, StoreError> {
        self.inner.queue_settings(names)
    }
    fn queue_lock(&mut self, name: &str, now: Timestamp) -> Result<QueueSettings, StoreError> {
        self.inner.queue_lock(name, now)
    }
    fn job_leased_count(&mut self, queue: &str, now: Timestamp) -> Result<u64, StoreError> {
        self.inner.job_leased_count(queue, now)
    }
    fn job_group_leased(
        &mut self,
        queue: &str,
        groups: &[&str],
        now: Timestamp,
    ) -> Result<Vec<(String, u64)>, StoreError> {
        let rows = self.inner.job_group_leased(queue, groups, now)?;
        self.gate.state.lock().unwrap().groups_counted += groups.len().max(rows.len()) as u64;
        Ok(rows)
    }
    fn job_fair_after(
        &mut self,
        queue: &str,
        priority: relay::Priority,
        after: (i64, JobId),
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let rows = self.inner.job_fair_after(queue, priority, after, limit)?;
        self.gate.state.lock().unwrap().candidates += rows.len() as u64;
        Ok(rows)
    }
    fn job_group_next(
        &mut self,
        queue: &str,
        priority: relay::Priority,
        after: &[(&str, i64, JobId)],
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let rows = self.inner.job_group_next(queue, priority, after, limit)?;
        self.gate.state.lock().unwrap().candidates += rows.len() as u64;
        Ok(rows)
    }
    fn job_dependents(&mut self, parents: &[JobId]) -> Result<Vec<relay_store::DependentRead>, StoreError> {
        self.inner.job_dependents(parents)
    }
    fn schedules_due(&mut self, now: Timestamp, limit: usize) -> Result<Vec<Result<Schedule, StoreError>>, StoreError> {
        self.inner.schedules_due(now, limit)
    }
    fn schedule_get(&mut self, name: &str) -> Result<Option<Schedule>, StoreError> {
        self.inner.schedule_get(name)
    }
    fn job_ready(&mut self, queue: &str, now: Timestamp, limit: usize) -> Result<Vec<ReadyRow>, StoreError> {
        let rows = self.inner.job_ready(queue, now, limit)?;
        self.gate.state.lock().unwrap().candidates += rows.len() as u64;
        Ok(rows)
    }
    fn job_ready_after(
        &mut self,
        queue: &str,
        now: Timestamp,
        after: Candidate,
        limit: usize,
    ) -> Result<Vec<ReadyRow>, StoreError> {
        let rows = self.inner.job_ready_after(queue, now, after, limit)?;
        self.gate.state.lock().unwrap().candidates += rows.len() as u64;
        Ok(rows)
    }
    fn job_next_ready_at(&mut self, queue: &str, now: Timestamp) -> Result<Option<Timestamp>, StoreError> {
        self.inner.job_next_ready_at(queue, now)
    }
    fn job_overdue(&mut self, now: Timestamp) -> Result<Vec<JobId>, StoreError> {
        self.inner.job_overdue(now)
    }
    fn event_last_seq(&mut self, id: JobId) -> Result<i64, StoreError> {
        self.inner.event_last_seq(id)
    }
    fn job_expiries(&mut self, id: JobId) -> Result<(u32, Option<u32>), StoreError> {
        self.inner.job_expiries(id)
    }
    fn mark_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        self.inner.mark_get(key, now)
    }
    fn event_get(&mut self, key: &str, now: Timestamp) -> Result<Option<String>, StoreError> {
        self.inner.event_get(key, now)
    }
    fn waits_on(&mut self, key: &str) -> Result<Vec<(JobId, String)>, StoreError> {
        self.inner.waits_on(key)
    }
    fn wait_of(&mut self, id: JobId) -> Result<Option<relay_store::Wait>, StoreError> {
        self.inner.wait_of(id)
    }
    fn mark_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.inner.mark_prune(before)
    }
    fn apply(&mut self, changes: &Changes<'_>) -> Result<(), StoreError> {
        self.inner.apply(changes)
    }
    fn apply_commit(&mut self, changes: &Changes<'_>) -> Result<(), CommitFailed> {
        self.inner.apply_commit(changes)
    }
    fn job_finished_window(&mut self, after: JobId) -> Result<relay_store::FinishedWindow, StoreError> {
        self.inner.job_finished_window(after)
    }
    fn job_delete_finished(&mut self, jobs: &[(JobId, Timestamp)]) -> Result<u64, StoreError> {
        self.inner.job_delete_finished(jobs)
    }
    fn worker_put(
        &mut self,
        id: &str,
        beat: &str,
        seen_at: Timestamp,
        stopped: bool,
        owner: &relay_store::WorkerOwner<'_>,
    ) -> Result<bool, StoreError> {
        self.inner.worker_put(id, beat, seen_at, stopped, owner)
    }
    fn worker_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.inner.worker_prune(before)
    }
    fn throughput_prune(&mut self, before: Timestamp) -> Result<u64, StoreError> {
        self.inner.throughput_prune(before)
    }
    fn notify_ready(&mut self) -> Result<(), StoreError> {
        self.inner.notify_ready()
    }
}

/// The SQLite backend with its writers gated; every other method passed
/// through.
struct GatedBackend {
    inner: SqliteBackend,
    gate: Arc<Gate>,
}

impl Backend for GatedBackend {
    fn open_writer(&self) -> Result<Box<WriterStore>, StoreError> {
        let inner = self.inner.open_writer()?;
        let real = inner
            .syncer()
            .expect("an SQLite file store splits its commits by default");
        Ok(Box::new(GatedStore {
            inner,
            gate: Arc::clone(&self.gate),
            syncer: Arc::new(GatedSyncer {
                inner: real,
                gate: Arc::clone(&self.gate),
            }),
        }))
    }
    fn open_reader(&self) -> Result<Box<dyn StoreReader>, StoreError> {
        self.inner.open_reader()
    }
    fn describe(&self) -> String {
        self.inner.describe()
    }
    fn quarantine(&self) {
        self.inner.quarantine();
    }
    fn failure_flag(&self) -> Option<Arc<std::sync::atomic::AtomicBool>> {
        self.inner.failure_flag()
    }
    fn durability(&self) -> String {
        self.inner.durability()
    }
    fn file(&self) -> Option<&Path> {
        self.inner.file()
    }
    fn writers(&self) -> usize {
        self.inner.writers()
    }
    fn drives_a_runtime(&self) -> bool {
        self.inner.drives_a_runtime()
    }
    fn watch_ready(&self, wake: Box<dyn Fn() + Send + Sync>) -> Result<Option<relay_store::WatchGuard>, StoreError> {
        self.inner.watch_ready(wake)
    }
}

/// Opens the gate for good when dropped: declared after the Relay, it is
/// dropped before it, so a failing assertion ends the test instead of
/// leaving the Relay's threads waiting at the gate forever.
struct OpenOnDrop(Arc<Gate>);

impl std::ops::Deref for OpenOnDrop {
    type Target = Gate;
    fn deref(&self) -> &Gate {
        &self.0
    }
}

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.release(u64::MAX / 2);
    }
}

fn gated_relay() -> (tempfile::TempDir, PathBuf, Relay, OpenOnDrop) {
    gated_relay_with(Options::default())
}

fn gated_relay_with(options: Options) -> (tempfile::TempDir, PathBuf, Relay, OpenOnDrop) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.db");
    let gate = Arc::new(Gate::default());
    let backend = GatedBackend {
        inner: SqliteBackend::file(&path),
        gate: Arc::clone(&gate),
    };
    let options = Options {
        reap_interval: Duration::from_secs(3600), // no idle commits in the way
        ..options
    };
    let relay = Relay::with_backend(Arc::new(backend), options).unwrap();
    (dir, path, relay, OpenOnDrop(gate))
}

/// Jobs committed to the file, as another process would see them.
fn committed_kinds(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn.prepare("SELECT kind FROM jobs ORDER BY id").unwrap();
    let rows = st.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Each job's state in the file, as another process would see it.
fn committed_states(path: &Path) -> Vec<String> {
    let conn = Connection::open(path).unwrap();
    let mut st = conn.prepare("SELECT state FROM jobs ORDER BY id").unwrap();
    let rows = st.query_map([], |r| r.get(0)).unwrap();
    rows.map(Result::unwrap).collect()
}

/// Waits up to 10 s for the file to hold these kinds.
fn wait_committed(path: &Path, kinds: &[&str]) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while committed_kinds(path) != kinds {
        assert!(std::time::Instant::now() < deadline, "never committed: {kinds:?}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn submit_in_thread(relay: &Relay, kind: &str) -> mpsc::Receiver<relay::Result<JobId>> {
    let (tx, rx) = mpsc::channel();
    let relay = relay.clone();
    let job = NewJob::new("q", kind, b"{}".to_vec());
    std::thread::spawn(move || {
        let _ = tx.send(relay.submit(job));
    });
    rx
}

#[test]
fn answers_and_reads_wait_for_the_fsync_while_the_writer_goes_on() {
    let (_dir, path, relay, gate) = gated_relay_with(Options {
        scheduler: false, // no tick's batch in the way
        ..Options::default()
    });

    // Hold the file's write lock so that the first submit waits in BEGIN
    // while seven more queue up behind it.
    let mut blocker = Connection::open(&path).unwrap();
    let tx = blocker
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let begun = gate.begins();
    let mut answers = vec![submit_in_thread(&relay, "k0")];
    // k0's batch is in BEGIN before the others are sent, so that they
    // queue behind it and make a batch of their own.
    gate.wait_for_begins(begun + 1);
    answers.extend((1..8).map(|i| submit_in_thread(&relay, &format!("k{i}"))));
    std::thread::sleep(Duration::from_millis(300));
    tx.rollback().unwrap();
    drop(blocker);

    // The writer commits k0's batch, hands it to the fsync stage (held at
    // the gate), and goes on to commit the other seven.
    gate.wait_for_waiters(1);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while committed_kinds(&path).len() < 8 {
        assert!(
            std::time::Instant::now() < deadline,
            "the writer stopped while an fsync was pending"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(gate.passed(), 0);

    // Committed, visible to another process, but nobody is answered yet,
    // and a read of this process waits too.
    let (read_tx, read_rx) = mpsc::channel();
    let reader = relay.clone();
    std::thread::spawn(move || {
        let _ = read_tx.send(reader.stats());
    });
    std::thread::sleep(Duration::from_millis(300));
    for a in &answers {
        assert!(a.try_recv().is_err(), "a caller was answered before its fsync");
    }
    assert!(read_rx.try_recv().is_err(), "a read returned a change not yet durable");

    gate.release(u64::MAX / 2);
    let mut ids: Vec<JobId> = answers
        .iter()
        .map(|a| a.recv_timeout(Duration::from_secs(10)).unwrap().unwrap())
        .collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
    let stats = read_rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(stats.queues["q"].counts[&relay::JobState::Ready], 8);
    let m = relay.metrics();
    assert!(m.commits >= 2, "{m:?}");
    assert!(m.syncs >= 1 && m.syncs <= m.commits, "{m:?}");
    assert!(gate.passed() >= 1);
}

#[test]
fn a_lone_caller_is_answered_after_one_fsync() {
    let (_dir, path, relay, gate) = gated_relay();
    let answer = submit_in_thread(&relay, "alone");
    gate.wait_for_waiters(1);
    assert_eq!(committed_kinds(&path), ["alone"]);
    std::thread::sleep(Duration::from_millis(200));
    assert!(answer.try_recv().is_err(), "answered before its fsync");
    gate.release(1);
    answer.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(gate.waiting(), 0);
    assert_eq!(relay.metrics().syncs, 1);
    assert_eq!(relay.metrics().caller_batches, 1, "the caller committed it itself");
}

#[test]
fn a_failed_fsync_answers_maybe_applied_and_stops_the_relay() {
    let (_dir, path, relay, gate) = gated_relay();
    gate.release(1);
    let before = relay.submit(NewJob::new("q", "before", Vec::new())).unwrap();
    gate.fail_from_now_on();
    match relay.submit(NewJob::new("q", "during", Vec::new())) {
        Err(Error::MaybeApplied(e)) => assert!(e.to_string().contains("fsync"), "{e}"),
        other => panic!("expected MaybeApplied, got {other:?}"),
    }
    // Written but maybe not on disk: "maybe applied" is exactly the truth.
    assert_eq!(committed_kinds(&path), ["before", "during"]);

    // After a failed fsync the disk may have dropped written pages, so a
    // later fsync could "succeed" over a hole: nothing more is written or read.
    match relay.submit(NewJob::new("q", "after", Vec::new())) {
        Err(Error::Storage(e)) => {
            let text = e.to_string();
            assert!(text.contains("fsync") && text.contains("reopen"), "{text}");
        }
        other => panic!("expected a Storage error, got {other:?}"),
    }
    assert_eq!(committed_kinds(&path), ["before", "during"]);
    assert!(matches!(relay.get(before), Err(Error::Storage(_))));
    assert_eq!(relay.metrics().failed_commits, 1);
    drop(relay);

    // Pages whose writeback failed may still sit in this process's view of
    // the file: it refuses to open the file again, and says what to do.
    match Relay::open(&path) {
        Err(Error::Open(e)) => {
            let text = e.to_string();
            assert!(
                text.contains("failed earlier in this process") && text.contains("start this process again"),
                "{text}"
            );
        }
        Err(e) => panic!("expected an open error, got {e:?}"),
        Ok(_) => panic!("reopened in the process whose fsync failed"),
    }
    // Another process opens it and finds what the file holds.
    let out = std::process::Command::new("python3")
        .args(["-c", "import sqlite3, sys; print(','.join(r[0] for r in sqlite3.connect(sys.argv[1]).execute('select kind from jobs order by id')))"])
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "before,during");
}

#[test]
fn the_split_can_be_switched_off() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("relay.db");
    let full = SqliteBackend::file(&path).with_settings(relay_sqlite::Settings {
        split_commit: false,
        ..relay_sqlite::Settings::default()
    });
    assert!(full.open_writer().unwrap().syncer().is_none());
    assert!(SqliteBackend::file(&path).open_writer().unwrap().syncer().is_some());
    assert!(SqliteBackend::memory().open_writer().unwrap().syncer().is_none());

    let options = Options {
        split_commit: false,
        ..Options::default()
    };
    let relay = Relay::open_with(&path, options).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert_eq!(relay.get(id).unwrap().kind, "k");
    assert_eq!(relay.metrics().syncs, 0);
    let relay = Relay::open(&path).unwrap();
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    assert_eq!(relay.metrics().syncs, 1);
}

/// Regression: Linux reports a failed writeback once, and the next fsync
/// returns 0 over pages it dropped. A batch committed after the failed one
/// was answered Ok when its own sync "succeeded".
#[test]
fn after_a_sync_fails_once_no_later_batch_is_answered_ok() {
    let (_dir, path, relay, gate) = gated_relay();
    // `a` alone: committed and held at the gate. `b`: committed after it,
    // its sync queued behind a's.
    let a = submit_in_thread(&relay, "a");
    gate.wait_for_waiters(1);
    let b = submit_in_thread(&relay, "b");
    wait_committed(&path, &["a", "b"]);
    // a's sync fails; every sync after it would succeed.
    gate.fail_next(1);
    gate.release(u64::MAX / 2);
    let a = a.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(a, Err(Error::MaybeApplied(_))), "{a:?}");
    let b = b.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(
        matches!(b, Err(Error::MaybeApplied(_))),
        "a batch committed after a failed fsync was answered {b:?}"
    );
    assert!(matches!(
        relay.submit(NewJob::new("q", "c", Vec::new())),
        Err(Error::Storage(_))
    ));
    assert_eq!(committed_kinds(&path), ["a", "b"]);
}

/// Regression: the failure flag was read only before a batch began, so a
/// batch that waited for the write lock while an fsync failed was
/// committed (and answered Ok by the next, "successful", fsync).
#[test]
fn a_batch_applied_while_a_sync_failed_is_never_committed() {
    let (_dir, path, relay, gate) = gated_relay();
    let a = submit_in_thread(&relay, "a");
    gate.wait_for_waiters(1);
    // b's batch starts, then waits in BEGIN for another connection's lock.
    let mut blocker = Connection::open(&path).unwrap();
    let tx = blocker
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .unwrap();
    let b = submit_in_thread(&relay, "b");
    std::thread::sleep(Duration::from_millis(300));
    gate.fail_next(1);
    let a = a.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(a, Err(Error::MaybeApplied(_))), "{a:?}");
    gate.release(u64::MAX / 2);
    tx.rollback().unwrap();
    drop(blocker);
    let b = b.recv_timeout(Duration::from_secs(10)).unwrap();
    assert!(matches!(b, Err(Error::Storage(_))), "{b:?}");
    assert_eq!(
        committed_kinds(&path),
        ["a"],
        "b reached the file after the failed fsync"
    );
}

/// A waiting lessee is woken only once the submit that made its job ready
/// is durable: its claim is never written before that fsync.
#[test]
fn lessees_are_not_woken_before_the_submit_is_durable() {
    let (_dir, path, relay, gate) = gated_relay_with(Options {
        poll_interval: Duration::from_secs(3600), // only the wake-up can end the wait
        ..Options::default()
    });
    let lessee = relay.clone();
    let (tx, leased) = mpsc::channel();
    // The lessee's first claim finds nothing; its commit's sync passes.
    gate.release(1);
    std::thread::spawn(move || {
        let r = lessee.lease(relay::LeaseRequest::new(["q"]).wait(Duration::from_secs(30)));
        let _ = tx.send(r);
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while gate.passed() < 1 {
        assert!(
            std::time::Instant::now() < deadline,
            "the lessee's first claim never synced"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(200)); // the lessee is waiting
    let submitted = submit_in_thread(&relay, "k");
    gate.wait_for_waiters(1);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        committed_states(&path),
        ["READY"],
        "a lessee claimed a job whose submit was not yet durable"
    );
    gate.release(u64::MAX / 2);
    let id = submitted.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    let jobs = leased.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    assert_eq!(jobs.len(), 1);
    assert_eq!(jobs[0].id, id);
}

/// Two Relays of one process on one file: when one meets a failed fsync,
/// the other stops too, at once (its own next fsync might "succeed" over
/// the pages the failed one dropped).
#[test]
fn a_failed_fsync_stops_every_relay_of_the_process_on_that_file() {
    let (_dir, path, relay, gate) = gated_relay();
    let other = Relay::open(&path).unwrap();
    gate.release(1);
    relay.submit(NewJob::new("q", "before", Vec::new())).unwrap();
    let id = other.submit(NewJob::new("q", "other", Vec::new())).unwrap();
    gate.fail_from_now_on();
    assert!(matches!(
        relay.submit(NewJob::new("q", "during", Vec::new())),
        Err(Error::MaybeApplied(_))
    ));
    match other.submit(NewJob::new("q", "after", Vec::new())) {
        Err(Error::Storage(e)) => assert!(e.to_string().contains("another Relay of this process"), "{e}"),
        r => panic!("the other Relay went on after the failed fsync: {r:?}"),
    }
    assert!(matches!(other.get(id), Err(Error::Storage(_))));
    assert!(!committed_kinds(&path).contains(&"after".to_owned()));
}

/// The claim's cost does not grow with the jobs of a group at its
/// `max_leased_per_group` (docs/ARCHITECTURE.md, "Groups in the claim"):
/// its line is not read, only its head, so a claim of another group reads
/// the same few candidates however far that group's turns run ahead. (This
/// file's store counts the candidates it returns; the gate is left open.)
/// Before heads, each claim here read every row of the held group standing
/// before the free group's next: about 1,000 a claim by the end.
#[test]
fn a_group_at_its_limit_costs_the_claim_one_row() {
    let (_dir, _path, relay, gate) = gated_relay();
    gate.release(u64::MAX / 2);
    relay
        .set_queue_limits(
            "q",
            relay::QueueLimits {
                max_leased_per_group: Some(1),
                ..relay::QueueLimits::default()
            },
        )
        .unwrap();
    let grouped = |g: &str| NewJob::new("q", "k", b"{}".to_vec()).group(g);
    relay
        .submit_batch((0..1_000).map(|_| grouped("held")).collect())
        .unwrap();
    relay
        .submit_batch((0..1_000).map(|_| grouped("free")).collect())
        .unwrap();
    let lease = |n: u32| relay.lease(relay::LeaseRequest::new(["q"]).max(n)).unwrap();
    let first = lease(2);
    assert_eq!(first.len(), 2);
    let held = first
        .iter()
        .find(|j| j.group.as_deref() == Some("held"))
        .expect("held leased");
    let free = first
        .iter()
        .find(|j| j.group.as_deref() == Some("free"))
        .expect("free leased");
    relay.ack(free.id, free.token, None).unwrap();
    let mut claims = 0u64;
    let before = gate.candidates();
    for _ in 0..999 {
        let got = lease(1);
        assert_eq!(got.len(), 1, "the free group's next job");
        assert_eq!(got[0].group.as_deref(), Some("free"));
        relay.ack(got[0].id, got[0].token, None).unwrap();
        claims += 1;
    }
    let read = gate.candidates() - before;
    assert!(
        read <= claims * 12,
        "{read} candidates read for {claims} claims, with {held:?} at its group's limit"
    );
}

/// Issue 39: a claim under `max_leased_per_group` read the lease count of
/// every leased group of its queue in every batch, and each lease cloned
/// the whole map of counts for its undo: 100,000 groups of one job took a
/// lease of 1,000 from 46 ms to 5.8 s and the server to 2.1 GB. The claim
/// now reads the counts of the groups it meets, so draining 100,000 groups
/// 1,000 at a time reads about one count per job leased, not one per
/// leased group per batch (5,000,000 here before).
#[test]
fn a_per_group_limit_over_100_000_groups_reads_the_groups_it_meets() {
    let (_dir, _path, relay, gate) = gated_relay();
    gate.release(u64::MAX / 2);
    relay
        .set_queue_limits(
            "q",
            relay::QueueLimits {
                max_leased_per_group: Some(1),
                ..relay::QueueLimits::default()
            },
        )
        .unwrap();
    const GROUPS: usize = 100_000;
    for chunk in 0..GROUPS / 10_000 {
        let jobs = (0..10_000)
            .map(|i| NewJob::new("q", "k", b"{}".to_vec()).group(format!("g{}", chunk * 10_000 + i)))
            .collect();
        relay.submit_batch(jobs).unwrap();
    }
    let before = gate.groups_counted();
    let mut leased = 0;
    let mut claims = 0;
    let mut g7 = None;
    loop {
        let long = Duration::from_secs(3600); // the test outlives no lease
        let got = relay
            .lease(relay::LeaseRequest::new(["q"]).max(1_000).lease_for(long))
            .unwrap();
        if got.is_empty() {
            break;
        }
        leased += got.len();
        g7 = g7.or_else(|| {
            got.iter()
                .find(|j| j.group.as_deref() == Some("g7"))
                .map(|j| (j.id, j.token))
        });
        claims += 1;
        assert!(claims <= GROUPS, "the queue never drained");
    }
    assert_eq!(leased, GROUPS, "every group's job leased once, none held back");
    let counted = gate.groups_counted() - before;
    assert!(
        counted <= 2 * GROUPS as u64,
        "{counted} group counts read for {leased} jobs leased in {claims} claims"
    );
    // Every group is at its limit: a second job of one waits for its ack.
    let second = relay.submit(NewJob::new("q", "k", b"{}".to_vec()).group("g7")).unwrap();
    let lease = || relay.lease(relay::LeaseRequest::new(["q"]).max(1_000)).unwrap();
    assert!(lease().is_empty(), "g7 is at its limit");
    let (id, token) = g7.expect("g7's job leased");
    relay.ack(id, token, None).unwrap();
    let got = lease();
    assert_eq!(got.iter().map(|j| j.id).collect::<Vec<_>>(), vec![second]);
}
