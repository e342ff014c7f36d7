//! Workers as their heartbeats describe them: alive, gone once their
//! heartbeats stop (their leases orphaned until they expire), stopped when
//! they say so, forgotten an hour after their last.

use crate::NewDb;
use relay::{Clock, Error, JobState, LeaseRequest, NewJob, Running, Timestamp, WorkerBeat, WorkerState};
use std::time::{Duration, Instant};

fn beat(id: &str, every: Duration, running: Vec<Running>) -> WorkerBeat {
    WorkerBeat {
        id: id.into(),
        name: format!("name-{id}"),
        host: "host-1".into(),
        pid: 42,
        queues: vec!["q".into()],
        concurrency: 8,
        version: "test 1".into(),
        started_at: Timestamp::from_millis(1_700_000_000_000),
        beat_every: every,
        running,
    }
}

pub fn workers_are_alive_gone_or_stopped(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    options.reap_interval = Duration::from_secs(3600); // no reclaim of its own
    let relay = db.open(options).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let leased = relay
        .lease(
            LeaseRequest::new(["q"])
                .worker("name-a")
                .lease_for(Duration::from_secs(60)),
        )
        .unwrap()
        .remove(0);
    let held = Running {
        job: id,
        token: leased.token,
        since: clock.now(),
    };
    relay
        .worker_beat(&beat("a", Duration::from_secs(1), vec![held]))
        .unwrap();
    relay
        .worker_beat(&beat("b", Duration::from_secs(60), Vec::new()))
        .unwrap();
    relay
        .worker_beat(&beat("c", Duration::from_secs(1), Vec::new()))
        .unwrap();
    relay
        .worker_stopped(&beat("c", Duration::from_secs(1), vec![held]))
        .unwrap();
    let all = relay.workers().unwrap();
    let ids: Vec<&str> = all.iter().map(|w| w.record.beat.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "c"]);
    assert_eq!(all[0].state, WorkerState::Alive);
    assert_eq!(
        all[0].record.beat,
        beat("a", Duration::from_secs(1), vec![held]),
        "kept as sent"
    );
    assert!(all[0].orphaned.is_empty(), "an alive worker's leases are its own");
    assert_eq!(all[2].state, WorkerState::Stopped);
    assert!(all[2].record.beat.running.is_empty(), "a stopped worker runs nothing");
    // Three missed heartbeats (and a second) later, a is gone, b is not.
    clock.advance(Duration::from_millis(4_001));
    let all = relay.workers().unwrap();
    assert_eq!(all[0].state, WorkerState::Gone);
    assert_eq!(all[1].state, WorkerState::Alive);
    assert_eq!(all[0].orphaned.len(), 1, "{all:?}");
    assert_eq!(all[0].orphaned[0].running, held);
    assert_eq!(all[0].orphaned[0].expires_at, leased.expires_at);
    // A heartbeat again: alive again.
    relay
        .worker_beat(&beat("a", Duration::from_secs(1), vec![held]))
        .unwrap();
    assert_eq!(relay.workers().unwrap()[0].state, WorkerState::Alive);
    // Its lease expires: no longer orphaned, and once the job is leased
    // again the lease is another's.
    clock.advance(Duration::from_secs(61));
    assert!(
        relay.workers().unwrap()[0].orphaned.is_empty(),
        "an expired lease holds nothing"
    );
    assert_eq!(relay.reap_expired().unwrap(), 1);
    let again = relay.lease(LeaseRequest::new(["q"])).unwrap();
    assert_eq!(again.len(), 1);
    let a = &relay.workers().unwrap()[0];
    assert_eq!(a.state, WorkerState::Gone);
    assert!(a.orphaned.is_empty(), "the job's lease is another's now: {a:?}");
    // Refused, field by field, and nothing recorded.
    let bad = WorkerBeat {
        concurrency: 0,
        ..beat("d", Duration::from_secs(1), Vec::new())
    };
    assert!(matches!(relay.worker_beat(&bad), Err(Error::InvalidInput(e)) if e.field == "concurrency"));
    assert_eq!(relay.workers().unwrap().len(), 3);
    assert_eq!(relay.get(id).unwrap().state(), JobState::Leased);
}

pub fn workers_not_seen_for_an_hour_are_forgotten(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    options.reap_interval = Duration::from_millis(20);
    let relay = db.open(options).unwrap();
    relay
        .worker_beat(&beat("old", Duration::from_secs(5), Vec::new()))
        .unwrap();
    clock.advance(Duration::from_secs(3000));
    relay
        .worker_beat(&beat("recent", Duration::from_secs(5), Vec::new()))
        .unwrap();
    clock.advance(Duration::from_secs(700));
    // The engine prunes by itself on its idle ticks.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let ids: Vec<String> = relay.workers().unwrap().into_iter().map(|w| w.record.beat.id).collect();
        if ids == ["recent"] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "a worker not seen for an hour was kept: {ids:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
