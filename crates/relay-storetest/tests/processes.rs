//! Guarantees that only real processes can show: durability across kill -9,
//! and fencing across two processes on one file.

use relay::{JobFilter, JobId, JobState, NewJob, Relay};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;
use std::time::Instant;

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

use relay_storetest::visitors::assert_sound as integrity_ok;

/// Acceptance 1: every acknowledged submit and ack survives kill -9.
#[test]
fn acknowledged_changes_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("crash.db");
    let mut submitted: HashSet<i64> = HashSet::new();
    let mut acked: HashSet<i64> = HashSet::new();
    for round in 0..20 {
        let mut child = Command::new(CHILD)
            .args(["churn", path.to_str().unwrap(), "4"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let kill_after = Duration::from_millis(fastrand::u64(20..400));
        let (first_tx, first_rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut lines = Vec::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if lines.is_empty() {
                    let _ = first_tx.send(());
                }
                lines.push(line);
            }
            lines
        });
        // Wait for the child to be under way (its first acknowledged
        // submit, however long a loaded machine takes to start it), then
        // kill it at a random moment.
        let under_way = first_rx.recv_timeout(Duration::from_secs(30));
        std::thread::sleep(kill_after);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        assert!(
            under_way.is_ok() && !lines.is_empty(),
            "round {round}: the child did nothing in 30 s"
        );
        for line in &lines {
            match line.split_once(' ') {
                Some(("S", id)) => submitted.insert(id.parse().unwrap()),
                Some(("A", id)) => acked.insert(id.parse().unwrap()),
                _ => panic!("unexpected line {line:?}"),
            };
        }
        integrity_ok(&path);
        let relay = Relay::open(&path).unwrap();
        for id in &submitted {
            let job = relay
                .get(JobId(*id))
                .unwrap_or_else(|e| panic!("round {round}: acknowledged submit {id} lost: {e}"));
            if acked.contains(id) {
                assert_eq!(
                    job.state(),
                    JobState::Succeeded,
                    "round {round}: acknowledged ack of {id} lost"
                );
            }
        }
    }
    assert!(
        submitted.len() > 100 && acked.len() > 50,
        "too little work to mean anything: {} / {}",
        submitted.len(),
        acked.len()
    );
}

/// Acceptance 2: two processes, 8 workers each, 20,000 jobs: each job
/// SUCCEEDED exactly once, no token accepted twice, stalled workers fenced.
#[test]
fn two_processes_never_share_a_job() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("shared.db");
    let total = 20_000;
    {
        let relay = Relay::open(&path).unwrap();
        for chunk in 0..total / 1000 {
            let jobs = (0..1000)
                .map(|i| NewJob::new("q", "k", format!("{chunk}-{i}").into_bytes()))
                .collect();
            relay.submit_batch(jobs).unwrap();
        }
    }
    let children: Vec<_> = (0..2)
        .map(|_| {
            Command::new(CHILD)
                .args(["work", path.to_str().unwrap(), "8", "1500"])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut accepted: HashMap<i64, i64> = HashMap::new();
    let mut lost = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(out.status.success(), "worker process failed: {:?}", out.status);
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let (id, token): (i64, i64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
            match parts[0] {
                "ACK" => assert!(accepted.insert(id, token).is_none(), "job {id} acked twice"),
                "LOST" => lost += 1,
                "L" => {}
                other => panic!("unexpected line {other}"),
            }
        }
    }
    assert_eq!(accepted.len(), total, "every job acked exactly once");
    assert!(lost > 0, "the stalled workers were never fenced off");
    let relay = Relay::open(&path).unwrap();
    let jobs = relay
        .list(&JobFilter {
            limit: 100_000,
            ..JobFilter::default()
        })
        .unwrap();
    assert_eq!(jobs.len(), total);
    for job in jobs {
        assert_eq!(job.state(), JobState::Succeeded);
        assert_eq!(
            Some(&job.status.last_token.0),
            accepted.get(&job.id.0),
            "job {}: the accepted token is its last",
            job.id
        );
    }
    integrity_ok(&path);
}

/// Spawns the worker runtime in a child process and waits until it has
/// started `running` handlers; returns the child and the ids it runs. Its
/// leases last 5 s: a heartbeat late on a loaded machine must not lose one
/// (these tests look at the leases the child held when it was stopped).
fn runtime_child(
    db: &std::path::Path,
    concurrency: u32,
    running: usize,
) -> (std::process::Child, Vec<i64>, BufReader<std::process::ChildStdout>) {
    let mut child = Command::new(CHILD)
        .args([
            "runtime",
            db.to_str().unwrap(),
            &concurrency.to_string(),
            "600000",
            "5000",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut ids = Vec::new();
    let mut line = String::new();
    while ids.len() < running {
        line.clear();
        assert!(out.read_line(&mut line).unwrap() > 0, "the worker process ended early");
        if let Some(id) = line.trim().strip_prefix("RUNNING ") {
            ids.push(id.parse().unwrap());
        }
    }
    (child, ids, out)
}

/// Issue 4, acceptance 1: a worker process killed with SIGKILL loses
/// nothing: its jobs run again after their leases expire.
#[test]
fn jobs_of_a_killed_worker_process_run_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("killed.db");
    let relay = Relay::open(&path).unwrap();
    let ids: Vec<JobId> = (0..8)
        .map(|_| relay.submit(NewJob::new("q", "k", Vec::new())).unwrap())
        .collect();
    let (mut child, running, _out) = runtime_child(&path, 4, 4);
    child.kill().unwrap();
    child.wait().unwrap();
    for id in &running {
        assert_eq!(relay.get(JobId(*id)).unwrap().state(), JobState::Leased);
    }
    let worker = relay::worker::Worker::new(relay.clone(), ["q"])
        .concurrency(4)
        .handle_signals(false)
        .handler("k", |_| Ok(None));
    let stop = worker.shutdown_handle();
    let stats = worker.stats();
    let t = std::thread::spawn(move || worker.run().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats.snapshot().succeeded < 8 {
        assert!(Instant::now() < deadline, "the killed worker's jobs never ran again");
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.graceful();
    t.join().unwrap();
    for id in &ids {
        let job = relay.get(*id).unwrap();
        assert_eq!(job.state(), JobState::Succeeded);
        let expired = relay.events(*id).unwrap().iter().any(|e| e.kind == "expired");
        assert_eq!(
            expired,
            running.contains(&id.0),
            "job {id}: only the killed worker's jobs expired"
        );
    }
}

/// Issue 4: SIGTERM stops a worker process gracefully: it stops leasing,
/// releases the jobs its handlers did not finish within the grace period,
/// and exits 0.
#[test]
fn sigterm_releases_unfinished_jobs_and_exits_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("term.db");
    let relay = Relay::open(&path).unwrap();
    let ids: Vec<JobId> = (0..4)
        .map(|_| relay.submit(NewJob::new("q", "k", Vec::new())).unwrap())
        .collect();
    let (mut child, running, mut out) = runtime_child(&path, 2, 2);
    let pid = child.id().to_string();
    assert!(Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    let start = Instant::now();
    let status = child.wait().unwrap();
    assert!(status.success(), "exit status {status:?}");
    assert!(start.elapsed() < Duration::from_secs(10));
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut out, &mut rest).unwrap();
    assert!(rest.contains("STOPPED released=2 succeeded=0"), "{rest}");
    for id in &ids {
        let job = relay.get(*id).unwrap();
        assert_eq!(
            (job.state(), job.status.attempts),
            (JobState::Ready, 0),
            "job {id} released or untouched"
        );
        let released = relay.events(*id).unwrap().iter().any(|e| e.kind == "released");
        assert_eq!(released, running.contains(&id.0));
    }
}

/// Issue 40, acceptance 2: a worker running five-step workflows (with a
/// sleep) is killed with SIGKILL at random moments, again and again, until
/// every workflow has finished. A side-effect log (the children's stdout:
/// `B` when a step's body starts, `R` once its record was answered) shows
/// that no step's body ran again after its record was answered, that a
/// body ran again only when the earlier run's record was never answered
/// (its worker died between body and record), and that what the job holds
/// for each step is the value its answered record carried.
#[test]
fn steps_run_once_across_kill_9_unless_killed_between_body_and_record() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("workflow.db");
    let jobs = 150;
    let ids: Vec<JobId> = {
        let relay = Relay::open(&path).unwrap();
        (0..jobs)
            .map(|_| relay.submit(NewJob::new("wf", "flow", b"{}".to_vec())).unwrap())
            .collect()
    };
    // In log order: (job, step, Some(value) for an answered record / None for a body start, child).
    let mut log: Vec<(i64, String, Option<String>, usize)> = Vec::new();
    let mut rounds = 0;
    loop {
        let done = {
            let relay = Relay::open(&path).unwrap();
            ids.iter()
                .all(|id| relay.get(*id).unwrap().state() == JobState::Succeeded)
        };
        if done {
            break;
        }
        rounds += 1;
        assert!(rounds < 300, "the workflows did not finish in 300 rounds");
        let mut child = Command::new(CHILD)
            .args(["workflow", path.to_str().unwrap(), "8"])
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let reader =
            std::thread::spawn(move || BufReader::new(stdout).lines().map_while(Result::ok).collect::<Vec<_>>());
        // Later rounds run longer, so that the tail of the work finishes.
        std::thread::sleep(Duration::from_millis(fastrand::u64(30..150) + 5 * rounds as u64));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        for line in reader.join().unwrap() {
            let f: Vec<&str> = line.split(' ').collect();
            match f.as_slice() {
                ["B", id, step] => log.push((id.parse().unwrap(), (*step).to_owned(), None, rounds)),
                ["R", id, step, value] => log.push((
                    id.parse().unwrap(),
                    (*step).to_owned(),
                    Some((*value).to_owned()),
                    rounds,
                )),
                _ => panic!("unexpected line {line:?}"),
            }
        }
    }
    let relay = Relay::open(&path).unwrap();
    let mut ran_again = 0;
    for id in &ids {
        let job = relay.get(*id).unwrap();
        let names: Vec<&str> = job.steps.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["s0", "s1", "nap", "s2", "s3", "s4"], "job {id}");
        for step in ["s0", "s1", "s2", "s3", "s4"] {
            let events: Vec<&(i64, String, Option<String>, usize)> =
                log.iter().filter(|(j, s, ..)| *j == id.0 && s == step).collect();
            let starts = events.iter().filter(|e| e.2.is_none()).count();
            assert!(starts >= 1, "job {id} step {step}: its body never ran");
            ran_again += starts - 1;
            // After an answered record, no body of that step starts again.
            if let Some(first_answer) = events.iter().position(|e| e.2.is_some()) {
                assert!(
                    events[first_answer..].iter().all(|e| e.2.is_some()),
                    "job {id} step {step}: a body ran after its record was answered: {events:?}"
                );
                // Every answer (a later run passing the step answers the same)
                // carries the value the job holds.
                let held = String::from_utf8(job.step(step).unwrap().output.clone()).unwrap();
                for e in &events[first_answer..] {
                    assert_eq!(
                        Some(format!("\"{}\"", e.2.as_deref().unwrap())),
                        Some(held.clone()),
                        "job {id} step {step}"
                    );
                }
            }
            // A body that ran again: each earlier run's child never
            // answered its record (it was killed between body and record).
            let mut bodies = events.iter().filter(|e| e.2.is_none()).peekable();
            while let Some(b) = bodies.next() {
                if bodies.peek().is_some() {
                    assert!(
                        !events.iter().any(|e| e.2.is_some() && e.3 == b.3),
                        "job {id} step {step}: ran again though round {} answered its record",
                        b.3
                    );
                }
            }
        }
    }
    eprintln!(
        "{jobs} workflows over {rounds} kills: {ran_again} step bodies ran again (killed between body and record)"
    );
    integrity_ok(&path);
}
