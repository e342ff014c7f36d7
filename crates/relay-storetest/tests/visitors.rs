//! Other programs open the database file while Relay runs: backups, the
//! `sqlite3` CLI, a python or rusqlite reader, a second Relay. None of them
//! may cost an acknowledged change or a second valid lease.
//!
//! Regression: every connection Relay opened checked the file's header with
//! `std::fs::File::open` + close, and on Linux closing any descriptor of a
//! file drops every POSIX lock the process holds on it, including the
//! SHARED lock SQLite keeps for a connection's life in WAL mode. The next
//! visitor to close then found nobody else on the file, checkpointed and
//! unlinked the live WAL: jobs answered afterwards were lost at kill -9.

use relay::{JobId, JobState, NewJob, Relay};
use relay_storetest::visitors::{
    assert_sound, python_reader, rusqlite_reader, shared_lock_holder, sqlite3_backup, wal, PYTHON_READER,
};
use std::collections::{HashMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

/// A `relay-testchild script` process: one command per line, answered.
struct Scripted {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    submitted: Vec<i64>,
    acked: Vec<i64>,
}

impl Scripted {
    fn start(path: &Path) -> Self {
        let mut child = Command::new(CHILD)
            .args(["script", path.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let mut output = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        output.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "OPEN", "the child did not open the database");
        Self {
            child,
            input,
            output,
            submitted: Vec::new(),
            acked: Vec::new(),
        }
    }

    fn pid(&self) -> i32 {
        i32::try_from(self.child.id()).unwrap()
    }

    /// Sends one command and reads its answer up to `OK`.
    fn run(&mut self, command: &str) {
        writeln!(self.input, "{command}").unwrap();
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "the child died during {command:?}"
            );
            let line = line.trim();
            match line.split_once(' ') {
                Some(("S", id)) => self.submitted.push(id.parse().unwrap()),
                Some(("A", id)) => self.acked.push(id.parse().unwrap()),
                _ if line == format!("OK {command}") => return,
                _ => panic!("{command:?} failed in the child: {line}"),
            }
        }
    }

    fn kill(mut self) -> (Vec<i64>, Vec<i64>) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
        (self.submitted, self.acked)
    }
}

/// Acceptance: the Relay process keeps SQLite's SHARED lock on the file
/// through every kind of public call (each opens what it needs lazily).
#[test]
fn a_relay_process_keeps_its_lock_through_every_kind_of_call() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("calls.db");
    let mut relay = Scripted::start(&path);
    assert_eq!(
        shared_lock_holder(&path),
        Some(relay.pid()),
        "no SHARED lock after open"
    );
    let calls = [
        "submit",
        "submit_batch",
        "get",
        "events",
        "list",
        "stats",
        "metrics",
        "async_stats",
        "append_event",
        "lease",
        "extend",
        "ack",
        "nack",
        "release",
        "complete_batch",
        "submit",
        "cancel",
        "retry",
        "delete",
        "prune",
        "reap_expired",
    ];
    for name in calls {
        relay.run(&format!("call {name}"));
        assert_eq!(
            shared_lock_holder(&path),
            Some(relay.pid()),
            "the Relay process lost its SHARED lock on the file after `{name}`"
        );
    }
    relay.kill();
}

/// The visitors of the file, in turn, each with the Relay running.
fn visit(path: &Path, visitor: &str, jobs: i64) {
    match visitor {
        "sqlite3 .backup" => sqlite3_backup(path, &path.with_extension("copy"), jobs),
        "rusqlite" => rusqlite_reader(path),
        "python3" => python_reader(path),
        "second relay" => {
            let mut other = Scripted::start(path);
            other.run("call stats");
            other.run("call submit");
            drop(other.input);
            assert!(other.child.wait().unwrap().success());
        }
        other => panic!("unknown visitor {other}"),
    }
}

/// Acceptance: the reproduction with the library: a Relay that has
/// read and written, visited in turn by a backup, a rusqlite reader, a
/// python reader and a second Relay, answers more submits and acks, is
/// killed -9; every answered change is on disk, and its WAL was never
/// unlinked while it ran.
#[test]
fn acknowledged_changes_survive_other_programs_on_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("visited.db");
    let mut relay = Scripted::start(&path);
    relay.run("submit 3");
    relay.run("call stats");
    relay.run("work 1");
    for visitor in ["sqlite3 .backup", "rusqlite", "python3", "second relay"] {
        visit(&path, visitor, relay.submitted.len() as i64);
        assert!(wal(&path).exists(), "the live WAL was unlinked after {visitor}");
        assert_eq!(
            shared_lock_holder(&path),
            Some(relay.pid()),
            "the Relay process lost its lock after {visitor}"
        );
        relay.run("submit 3");
        relay.run("call list");
        relay.run("work 2");
    }
    let (submitted, acked) = relay.kill();
    assert_eq!(submitted.len(), 15);
    let reopened = Relay::open(&path).unwrap();
    for id in submitted {
        let job = reopened
            .get(JobId(id))
            .unwrap_or_else(|e| panic!("acknowledged submit {id} lost: {e}"));
        if acked.contains(&id) {
            assert_eq!(job.state(), JobState::Succeeded, "acknowledged ack of {id} lost");
        }
    }
    drop(reopened);
    assert_sound(&path);
}

/// Acceptance: three Relay processes, started one after another, lease from
/// one file while other programs (rusqlite here, python3's sqlite3) open and
/// close it over and over: no job is ever accepted from two leases, and the
/// file stays sound (on the bug, a later process started on a fresh WAL and
/// leased jobs already acked, or found the file damaged).
#[test]
fn relays_never_share_a_job_while_others_open_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("busy.db");
    let total = 3_000;
    {
        let relay = Relay::open(&path).unwrap();
        let jobs = (0..total)
            .map(|i| NewJob::new("q", "k", format!("{i}").into_bytes()))
            .collect();
        relay.submit_batch(jobs).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let visitor = {
        let (path, stop) = (path.clone(), std::sync::Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut visits = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                // Busy moments are expected: a visitor that cannot read now just goes on.
                if visits % 2 == 0 {
                    if let Ok(conn) = rusqlite::Connection::open(&path) {
                        let _ = conn.query_row("SELECT count(*) FROM jobs", [], |r| r.get::<_, i64>(0));
                    }
                } else {
                    let _ = Command::new("python3").args(["-c", PYTHON_READER]).arg(&path).output();
                }
                visits += 1;
                std::thread::sleep(Duration::from_millis(5));
            }
            visits
        })
    };
    let start = Instant::now();
    let mut children = Vec::new();
    for _ in 0..3 {
        children.push(
            Command::new(CHILD)
                .args(["work", path.to_str().unwrap(), "4", "0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(300));
    }
    let mut accepted: HashMap<i64, i64> = HashMap::new();
    for child in children {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "a worker process failed ({:?}; see its stderr above)",
            out.status
        );
        for line in String::from_utf8(out.stdout).unwrap().lines() {
            let parts: Vec<&str> = line.split(' ').collect();
            let (id, token): (i64, i64) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
            if parts[0] == "ACK" {
                if let Some(first) = accepted.insert(id, token) {
                    panic!("job {id} was accepted twice, from tokens {first} and {token}");
                }
            }
        }
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let visits = visitor.join().unwrap();
    assert!(
        visits > 10,
        "the visitor hardly ran ({visits} visits in {:?})",
        start.elapsed()
    );
    assert_eq!(accepted.len(), total, "every job acked once");
    let relay = Relay::open(&path).unwrap();
    let done: HashSet<i64> = relay
        .list(&relay::JobFilter {
            state: Some(JobState::Succeeded),
            limit: 10_000,
            ..relay::JobFilter::default()
        })
        .unwrap()
        .iter()
        .map(|j| j.id.0)
        .collect();
    assert_eq!(done.len(), total);
}
