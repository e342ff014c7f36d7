//! Group commit: many callers share one commit, and each returns only after
//! the commit that carries its operation.

use crate::NewDb;
use relay::{JobState, LeaseRequest, NewJob, Options};
use std::sync::Barrier;

pub fn many_callers_share_commits(new_db: &NewDb) {
    let db = new_db();
    let relay = db.open(Options::default()).unwrap();
    let callers = 32;
    let per_caller = 40;
    let barrier = Barrier::new(callers);
    let before = relay.metrics();
    std::thread::scope(|s| {
        for c in 0..callers {
            let relay = relay.clone();
            let barrier = &barrier;
            s.spawn(move || {
                barrier.wait();
                for i in 0..per_caller {
                    let id = relay
                        .submit(NewJob::new("q", "k", format!("{c}-{i}").into_bytes()))
                        .unwrap();
                    // Read connections see only committed data: had the reply
                    // come before the commit, this read could miss the job.
                    assert_eq!(relay.get(id).unwrap().state(), JobState::Ready);
                }
                barrier.wait();
                while let Some(l) = relay.lease(LeaseRequest::new(["q"])).unwrap().pop() {
                    relay.ack(l.id, l.token, None).unwrap();
                    assert_eq!(relay.get(l.id).unwrap().state(), JobState::Succeeded);
                }
            });
        }
    });
    let m = relay.metrics();
    let ops = m.operations - before.operations;
    let commits = m.commits - before.commits;
    let jobs = (callers * per_caller) as u64;
    assert!(
        ops >= 3 * jobs,
        "every submit, lease and ack went through the writer: {ops}"
    );
    assert!(
        commits * 4 <= ops,
        "{commits} commits for {ops} operations: callers are not sharing commits"
    );
    assert!(m.largest_batch > 1);
    let stats = relay.stats().unwrap();
    assert_eq!(stats.queues["q"].counts[&JobState::Succeeded], jobs);
}
