//! Job dependencies across real processes (issue "Scheduling", acceptance
//! 2): three worker processes run a graph of chains, a fan-in and a parent
//! that fails, one of them is killed with SIGKILL partway, and every
//! dependent still runs after (and only after) the jobs it waits for, or
//! is cancelled when one of them fails. On SQLite and on PostgreSQL.

use relay::{JobId, JobState, NewJob, Options, Relay, Timestamp};
use relay_storetest::pg::PgServer;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

/// Worker processes, killed when dropped (none is left running after a
/// failed assertion).
struct Workers(Vec<Child>);

impl Drop for Workers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// The worker runtime on queue `q` in a child process (1 s leases, each
/// job sleeping `sleep_ms`); counts the jobs it has started.
fn worker(db: &str, sleep_ms: u64, started: &Arc<AtomicUsize>) -> Child {
    let mut child = Command::new(CHILD)
        .args(["runtime", db, "4", &sleep_ms.to_string()])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let out = BufReader::new(child.stdout.take().unwrap());
    let started = started.clone();
    std::thread::spawn(move || {
        for line in out.lines().map_while(Result::ok) {
            if line.starts_with("RUNNING ") {
                started.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    child
}

/// When `id` was first leased and when it succeeded, and by which worker
/// process, from its event log.
struct Life {
    first_leased: Option<Timestamp>,
    succeeded: Option<Timestamp>,
    workers: BTreeSet<String>,
}

fn life(relay: &Relay, id: JobId) -> Life {
    let mut l = Life {
        first_leased: None,
        succeeded: None,
        workers: BTreeSet::new(),
    };
    for e in relay.events(id).unwrap() {
        match e.kind.as_str() {
            "leased" => {
                l.first_leased.get_or_insert(e.at);
                l.workers
                    .insert(e.data["worker"].as_str().unwrap_or_default().to_owned());
            }
            "succeeded" => l.succeeded = Some(e.at),
            _ => {}
        }
    }
    l
}

fn dependencies_resolve_across_processes_and_a_kill_9(db: &str) {
    let relay = Relay::connect(db, Options::default()).unwrap();
    let job = || NewJob::new("q", "k", Vec::new());
    // Twenty chains of ten; each link waits for the one before it.
    let mut edges: Vec<(JobId, JobId)> = Vec::new();
    let mut chains = Vec::new();
    for _ in 0..20 {
        let mut link = relay.submit(job()).unwrap();
        chains.push(link);
        for _ in 1..10 {
            let next = relay.submit(job().depends_on([link])).unwrap();
            edges.push((link, next));
            link = next;
        }
    }
    // A fan-in onto one job from the heads of every chain and 200 more.
    let mut parents: Vec<JobId> = relay.submit_batch((0..200).map(|_| job()).collect()).unwrap();
    parents.extend(&chains);
    let fan_in = relay.submit(job().depends_on(parents.iter().copied())).unwrap();
    edges.extend(parents.iter().map(|p| (*p, fan_in)));
    // A parent no worker can run (no handler for its kind: DEAD), with a
    // dependent that is cancelled and one that runs anyway.
    let doomed = relay.submit(NewJob::new("q", "no-such-kind", Vec::new())).unwrap();
    let cancelled = relay.submit(job().depends_on([doomed])).unwrap();
    let anyway = relay
        .submit(
            job()
                .depends_on([doomed, fan_in])
                .on_dependency_failure(relay::DependencyFailure::Run),
        )
        .unwrap();
    edges.push((fan_in, anyway));
    let total = 200 + 200 + 1 + 3;

    let started = Arc::new(AtomicUsize::new(0));
    let mut workers = Workers((0..3).map(|_| worker(db, 20, &started)).collect());
    // Kill one process partway, while it holds leases.
    let deadline = Instant::now() + Duration::from_secs(60);
    while started.load(Ordering::Relaxed) < 60 {
        assert!(Instant::now() < deadline, "the workers never got going");
        std::thread::sleep(Duration::from_millis(5));
    }
    workers.0[0].kill().unwrap(); // SIGKILL
    workers.0[0].wait().unwrap();
    workers.0.push(worker(db, 20, &started));

    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let counts = &relay.stats().unwrap().queues["q"].counts;
        let finished: u64 = [JobState::Succeeded, JobState::Dead, JobState::Cancelled]
            .iter()
            .map(|s| counts[s])
            .sum();
        if finished == total {
            break;
        }
        assert!(Instant::now() < deadline, "the graph did not finish: {counts:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(workers);

    assert_eq!(relay.get(doomed).unwrap().state(), JobState::Dead);
    assert_eq!(relay.get(cancelled).unwrap().state(), JobState::Cancelled);
    let reason = relay.events(cancelled).unwrap().pop().unwrap().data["reason"].clone();
    assert_eq!(reason, format!("job {doomed} it depends on ended DEAD"));
    // Everything else ran, each dependent after every job it waits for.
    let mut lives = BTreeMap::new();
    for (p, c) in &edges {
        for id in [p, c] {
            lives.entry(*id).or_insert_with(|| life(&relay, *id));
        }
    }
    let mut expired = 0;
    for id in lives.keys() {
        assert_eq!(relay.get(*id).unwrap().state(), JobState::Succeeded, "job {id}");
        expired += relay
            .events(*id)
            .unwrap()
            .iter()
            .filter(|e| e.kind == "expired")
            .count();
    }
    for (p, c) in &edges {
        let (parent, child) = (&lives[p], &lives[c]);
        assert!(
            child.first_leased >= parent.succeeded,
            "job {c} was leased before job {p} it waits for had succeeded"
        );
    }
    assert!(expired > 0, "the killed process held leases that had to expire");
    let workers: BTreeSet<&String> = lives.values().flat_map(|l| &l.workers).collect();
    assert!(
        workers.len() >= 3,
        "parents and dependents ran in several processes: {workers:?}"
    );
}

#[test]
fn dependencies_resolve_across_processes_and_a_kill_9_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("deps.db");
    dependencies_resolve_across_processes_and_a_kill_9(db.to_str().unwrap());
}

#[test]
fn dependencies_resolve_across_processes_and_a_kill_9_on_postgres() {
    let url = PgServer::shared().new_database();
    dependencies_resolve_across_processes_and_a_kill_9(&url);
}
