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
        .lease(LeaseRequest::new(["q"]).worker("a").lease_for(Duration::from_secs(60)))
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

/// Issue 39, item 5: any client could overwrite another worker's record.
/// A record made over HTTP is written only with its secret's hash; one
/// made in-process by no remote claim; a forgotten one by anyone. Two
/// first heartbeats of one id: the second is refused. Refused writes
/// change nothing. Seen failing before (every write was taken).
pub fn a_workers_record_is_written_only_by_its_maker(new_db: &NewDb) {
    let db = new_db();
    let (options, clock) = crate::clocked();
    let relay = db.open(options).unwrap();
    let remote = |presented: Option<&str>, fresh: &str| relay::WorkerClaim::Remote {
        presented: presented.map(str::to_owned),
        fresh: fresh.to_owned(),
    };
    let mut first = beat("r", Duration::from_secs(5), Vec::new());
    relay.worker_beat_as(&first, false, remote(None, "hash-1")).unwrap();
    // Another client's first heartbeat of the same id, and wrong secrets.
    let mut other = first.clone();
    other.name = "intruder".into();
    for claim in [remote(None, "hash-2"), remote(Some("hash-2"), "hash-3")] {
        let err = relay.worker_beat_as(&other, false, claim).unwrap_err();
        assert!(
            matches!(err, Error::WorkerTaken { ref worker } if worker == "r"),
            "{err:?}"
        );
    }
    assert!(matches!(
        relay.worker_beat(&other).unwrap_err(),
        Error::WorkerTaken { .. }
    ));
    let name = |id: &str| {
        relay
            .workers()
            .unwrap()
            .into_iter()
            .find(|w| w.record.beat.id == id)
            .map(|w| w.record.beat.name)
    };
    assert_eq!(name("r").as_deref(), Some("name-r"), "refused writes change nothing");
    // Its maker, with its secret's hash, writes it (also its last beat).
    first.concurrency = 3;
    relay
        .worker_beat_as(&first, false, remote(Some("hash-1"), "hash-9"))
        .unwrap();
    relay
        .worker_beat_as(&first, true, remote(Some("hash-1"), "hash-9"))
        .unwrap();
    // In-process records: no remote claim writes them.
    relay
        .worker_beat(&beat("local", Duration::from_secs(5), Vec::new()))
        .unwrap();
    let err = relay
        .worker_beat_as(&other_of("local"), false, remote(None, "hash-4"))
        .unwrap_err();
    assert!(matches!(err, Error::WorkerTaken { .. }), "{err:?}");
    relay
        .worker_beat(&beat("local", Duration::from_secs(5), Vec::new()))
        .unwrap();
    // Forgotten (an hour unseen): the id is free again.
    clock.advance(Duration::from_secs(3700));
    relay.worker_beat_as(&other, false, remote(None, "hash-5")).unwrap();
    assert_eq!(name("r").as_deref(), Some("intruder"));
}

fn other_of(id: &str) -> WorkerBeat {
    let mut b = beat(id, Duration::from_secs(5), Vec::new());
    b.name = "intruder".into();
    b
}

/// Issue 39, item 5: a client could invent a "gone" worker listing a live
/// worker's job and lease, which then showed as orphaned. A gone worker's
/// lease is orphaned only if the job is leased under that worker's id
/// (runtimes lease under their id; only a record's maker writes it), even
/// when the invented worker copies the live one's name. Seen failing before:
/// the invented worker showed the job as orphaned (first with any name,
/// then, while leases named the worker's name, with a copied name).
pub fn a_record_naming_another_workers_lease_orphans_nothing(new_db: &NewDb) {
    let db = new_db();
    let (mut options, clock) = crate::clocked();
    options.reap_interval = Duration::from_secs(3600);
    let relay = db.open(options).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let leased = relay
        .lease(
            LeaseRequest::new(["q"])
                .worker("real")
                .lease_for(Duration::from_secs(600)),
        )
        .unwrap()
        .remove(0);
    let held = Running {
        job: id,
        token: leased.token,
        since: clock.now(),
    };
    relay
        .worker_beat(&WorkerBeat {
            name: "name-real".into(), // the live worker's name, copied
            ..beat("fake", Duration::from_secs(1), vec![held])
        })
        .unwrap();
    relay
        .worker_beat(&beat("real", Duration::from_secs(1), vec![held]))
        .unwrap();
    clock.advance(Duration::from_secs(10)); // both gone: three beats missed
    let all = relay.workers().unwrap();
    let orphans = |id: &str| all.iter().find(|w| w.record.beat.id == id).map(|w| w.orphaned.len());
    assert_eq!(all[0].state, WorkerState::Gone);
    assert_eq!(
        orphans("fake"),
        Some(0),
        "a lease held under another worker's id is not the invented worker's"
    );
    assert_eq!(orphans("real"), Some(1), "its own lease is orphaned");
}
