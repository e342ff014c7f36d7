//! Guarantees that only real processes can show: durability across kill -9,
//! and fencing across two processes on one file.

use relay::{JobFilter, JobId, JobState, NewJob, Relay};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

fn integrity_ok(path: &std::path::Path) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let check: String = conn.query_row("PRAGMA integrity_check", [], |r| r.get(0)).unwrap();
    assert_eq!(check, "ok");
}

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
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        // Wait for the child to be under way, then kill it at a random moment.
        let start = Instant::now();
        std::thread::sleep(Duration::from_millis(150) + kill_after);
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let lines = reader.join().unwrap();
        assert!(
            !lines.is_empty() || start.elapsed() < Duration::from_secs(1),
            "round {round}: the child did nothing"
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
