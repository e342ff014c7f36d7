//! What only the PostgreSQL store has: LISTEN/NOTIFY wake-ups across Relay
//! processes, and the schema version check.

use relay::{LeaseRequest, NewJob, Options, Relay};
use relay_storetest::{pg::PgServer, PgDb, TestDb};
use std::time::{Duration, Instant};

#[test]
fn a_submit_in_one_relay_wakes_a_lessee_of_another_at_once() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url);
    // With a 60 s poll, only a notification can wake the waiter in time.
    let waiting = db
        .open(Options {
            poll_interval: Duration::from_secs(60),
            ..Options::default()
        })
        .unwrap();
    let other = db.open(Options::default()).unwrap();
    let start = Instant::now();
    let got = std::thread::scope(|s| {
        let w = s.spawn(|| {
            waiting
                .lease(LeaseRequest::new(["q"]).wait(Duration::from_secs(30)))
                .unwrap()
        });
        std::thread::sleep(Duration::from_millis(300));
        other.submit(NewJob::new("q", "k", Vec::new())).unwrap();
        w.join().unwrap()
    });
    assert_eq!(got.len(), 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by NOTIFY, not by polling: {:?}",
        start.elapsed()
    );
}

#[test]
fn a_newer_schema_is_refused() {
    let url = PgServer::shared().new_database();
    let db = PgDb::fresh_at(url.clone());
    drop(db.open(Options::default()).unwrap());
    let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    client.batch_execute("UPDATE relay_schema SET version = 99").unwrap();
    let e = db.open(Options::default()).unwrap_err();
    assert!(e.to_string().contains("schema version 99 is newer"), "{e}");
    let _ = Relay::in_memory();
}

/// Issue 6, acceptance 2: three Relay processes on one PostgreSQL, 8 workers
/// each, 30,000 jobs; one process is killed with SIGKILL midway. Every job
/// ends SUCCEEDED, no job is acknowledged twice, no token is accepted twice,
/// and the killed process's leases run again elsewhere after they expire.
#[test]
fn three_processes_share_one_database_and_survive_a_kill_9() {
    use std::collections::HashMap;
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");
    let url = PgServer::shared().new_database();
    let relay = PgDb::fresh_at(url.clone()).open(Options::default()).unwrap();
    let total = 30_000;
    for chunk in 0..total / 1000 {
        relay
            .submit_batch(
                (0..1000)
                    .map(|i| NewJob::new("q", "k", format!("{chunk}-{i}").into_bytes()))
                    .collect(),
            )
            .unwrap();
    }
    let mut children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(CHILD)
                .args(["work", &url, "8", "0"])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap()
        })
        .collect();
    // Let the first process get well into the work, then kill it.
    let mut victim = children.remove(0);
    let mut out = BufReader::new(victim.stdout.take().unwrap());
    let mut lines = Vec::new();
    let mut line = String::new();
    while lines.len() < 2000 && out.read_line(&mut line).unwrap() > 0 {
        lines.push(std::mem::take(&mut line));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    lines.extend(out.lines().map_while(Result::ok));
    for child in children {
        let o = child.wait_with_output().unwrap();
        assert!(o.status.success(), "a surviving process failed: {:?}", o.status);
        lines.extend(String::from_utf8(o.stdout).unwrap().lines().map(str::to_owned));
    }
    let mut accepted: HashMap<i64, i64> = HashMap::new();
    for l in &lines {
        let parts: Vec<&str> = l.split_whitespace().collect();
        if parts.first() == Some(&"ACK") {
            let (id, token) = (parts[1].parse().unwrap(), parts[2].parse().unwrap());
            assert!(accepted.insert(id, token).is_none(), "job {id} acknowledged twice");
        }
    }
    let jobs = relay
        .list(&relay::JobFilter {
            limit: 100_000,
            ..Default::default()
        })
        .unwrap();
    assert_eq!(jobs.len(), total);
    let mut unreported = 0;
    for job in &jobs {
        assert_eq!(job.state(), relay::JobState::Succeeded, "job {}", job.id);
        match accepted.get(&job.id.0) {
            Some(token) => assert_eq!(
                *token, job.status.last_token.0,
                "job {}: the accepted token is its last",
                job.id
            ),
            None => unreported += 1, // acked by the killed process just before it died
        }
    }
    assert!(
        unreported <= 8,
        "{unreported} jobs succeeded without an acknowledgement being seen"
    );
    let expired = jobs.iter().filter(|j| j.status.attempts > 1).count();
    assert!(expired > 0, "the killed process's leases never ran again elsewhere");
}
