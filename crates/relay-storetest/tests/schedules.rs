//! Periodic jobs across real processes (issue "Scheduling", acceptance 2):
//! three processes run the scheduler on one store, and each tick of a
//! schedule enqueues exactly one job. On SQLite and on PostgreSQL.

use relay::{JobFilter, NewJob, NewSchedule, Options, Relay};
use relay_storetest::pg::PgServer;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

const CHILD: &str = env!("CARGO_BIN_EXE_relay-testchild");

/// Processes that run the scheduler and nothing else, killed when dropped.
struct Schedulers(Vec<Child>);

impl Schedulers {
    fn start(db: &str, n: usize) -> Self {
        let mut all = Schedulers(Vec::new());
        for _ in 0..n {
            let mut child = Command::new(CHILD)
                .args(["idle", db])
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .unwrap();
            let mut out = BufReader::new(child.stdout.take().unwrap());
            all.0.push(child);
            let mut line = String::new();
            out.read_line(&mut line).unwrap();
            assert_eq!(line.trim(), "OPEN", "a scheduler process did not open the store");
        }
        all
    }
}

impl Drop for Schedulers {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn each_tick_once_with_three_schedulers(db: &str) {
    let options = Options {
        scheduler: false, // only the three processes run it
        ..Options::default()
    };
    let relay = Relay::connect(db, options).unwrap();
    let schedulers = Schedulers::start(db, 3);
    // Ten schedules: ten chances a second for the processes to meet at one.
    let start = std::time::Instant::now();
    for i in 0..10 {
        relay
            .add_schedule(NewSchedule::every(
                format!("every-second-{i}"),
                Duration::from_secs(1),
                NewJob::new("ticks", "k", Vec::new()),
            ))
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(6_500));
    drop(schedulers);
    // The window as it was, not as it was meant: a loaded machine wakes
    // this thread late, and late schedulers merge missed ticks into one.
    let window = start.elapsed().as_secs_f64();
    let jobs = relay
        .list(&JobFilter {
            queue: Some("ticks".into()),
            limit: 1000,
            ..JobFilter::default()
        })
        .unwrap();
    let ticks: Vec<(String, String)> = jobs
        .iter()
        .map(|j| {
            let data = &relay.events(j.id).unwrap()[0].data;
            (
                data["schedule"].as_str().unwrap().to_owned(),
                data["tick"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let distinct: BTreeSet<&(String, String)> = ticks.iter().collect();
    assert_eq!(distinct.len(), ticks.len(), "a tick enqueued two jobs: {ticks:?}");
    for i in 0..10 {
        let n = ticks.iter().filter(|(s, _)| *s == format!("every-second-{i}")).count();
        assert!(
            n >= 2 && n as f64 <= window + 1.0,
            "{n} jobs in {window:.1} s of a 1 s schedule"
        );
    }
}

#[test]
fn sqlite_three_schedulers_enqueue_each_tick_once() {
    let dir = tempfile::tempdir().unwrap();
    each_tick_once_with_three_schedulers(dir.path().join("cron.db").to_str().unwrap());
}

#[test]
fn postgres_three_schedulers_enqueue_each_tick_once() {
    each_tick_once_with_three_schedulers(&PgServer::shared().new_database());
}
