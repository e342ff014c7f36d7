//! Bad input: each gets its typed error, and nothing changes.

use crate::{clocked, NewDb};
use relay::{Error, JobFilter, JobId, JobState, LeaseRequest, LeaseToken, NewJob, Options, Relay};
use std::time::Duration;

fn open_small(new_db: &NewDb) -> (Relay, Box<dyn crate::TestDb>) {
    let db = new_db();
    let (mut options, _clock) = clocked();
    options.limits.max_payload_bytes = 1024;
    (db.open(options).unwrap(), db)
}

fn field(e: Error) -> &'static str {
    match e {
        Error::InvalidInput(i) => i.field,
        other => panic!("expected InvalidInput, got {other:?}"),
    }
}

fn all_jobs(relay: &Relay) -> Vec<relay::Job> {
    relay
        .list(&JobFilter {
            limit: 1000,
            ..JobFilter::default()
        })
        .unwrap()
}

pub fn bad_submits_change_nothing(new_db: &NewDb) {
    let (relay, _db) = open_small(new_db);
    let ok = || NewJob::new("q", "k", Vec::new());
    let cases: Vec<(NewJob, &str)> = vec![
        (NewJob::new("", "k", Vec::new()), "queue"),
        (NewJob::new("q".repeat(65), "k", Vec::new()), "queue"),
        (NewJob::new("a b", "k", Vec::new()), "queue"),
        (NewJob::new("q", "", Vec::new()), "kind"),
        (ok().priority(4), "priority"),
        (NewJob::new("q", "k", vec![0u8; 1025]), "payload"),
        (ok().max_attempts(0), "max_attempts"),
        (ok().unique_key("k".repeat(300)), "unique_key"),
    ];
    let before = relay.metrics();
    for (job, want) in cases {
        assert_eq!(field(relay.submit(job).unwrap_err()), want);
    }
    // One bad job fails the whole batch.
    let e = relay.submit_batch(vec![ok(), ok().priority(9), ok()]).unwrap_err();
    assert_eq!(field(e), "priority");
    assert!(all_jobs(&relay).is_empty(), "nothing was created");
    assert_eq!(
        relay.metrics().operations,
        before.operations,
        "refused before reaching the writer"
    );
    // The limit itself is accepted.
    relay
        .submit(NewJob::new("q".repeat(64), "k", vec![0u8; 1024]).priority(3))
        .unwrap();
}

pub fn unknown_ids_are_not_found(new_db: &NewDb) {
    let (relay, _db) = open_small(new_db);
    let real = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let id = JobId(real.0 + 1000);
    let t = LeaseToken(1);
    let nf = |r: Result<(), Error>| assert!(matches!(r, Err(Error::NotFound { id: i }) if i == id), "{r:?}");
    nf(relay.get(id).map(drop));
    nf(relay.events(id).map(drop));
    nf(relay.ack(id, t, None));
    nf(relay.nack(id, t, "e", None).map(drop));
    nf(relay.extend(id, t, Duration::from_secs(1)).map(drop));
    nf(relay.release(id, t));
    nf(relay.cancel(id));
    nf(relay.retry(id));
    nf(relay.delete(id));
    nf(relay.append_event(id, "log", &serde_json::json!(1)).map(drop));
    assert_eq!(all_jobs(&relay).len(), 1);
    assert_eq!(relay.get(real).unwrap().state(), JobState::Ready);
}

pub fn bad_lease_requests_are_refused(new_db: &NewDb) {
    let (relay, _db) = open_small(new_db);
    relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let cases = [
        (LeaseRequest::new(Vec::<String>::new()), "queues"),
        (LeaseRequest::new(["bad queue"]), "queue"),
        (LeaseRequest::new(["q"]).max(0), "max"),
        (LeaseRequest::new(["q"]).max(1001), "max"),
        (LeaseRequest::new(["q"]).lease_for(Duration::ZERO), "lease_for"),
        (LeaseRequest::new(["q"]).wait(Duration::from_secs(7200)), "wait"),
        (LeaseRequest::new(["q"]).worker(""), "worker"),
    ];
    for (req, want) in cases {
        assert_eq!(field(relay.lease(req).unwrap_err()), want);
    }
    assert_eq!(all_jobs(&relay)[0].state(), JobState::Ready, "nothing was leased");
}

pub fn oversized_result_and_event_are_refused(new_db: &NewDb) {
    let (relay, _db) = open_small(new_db);
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["q"])).unwrap().remove(0);
    assert_eq!(
        field(relay.ack(id, l.token, Some(vec![1u8; 2000])).unwrap_err()),
        "result"
    );
    assert_eq!(
        field(
            relay
                .append_event(id, "log", &serde_json::json!("x".repeat(2000)))
                .unwrap_err()
        ),
        "event data"
    );
    assert_eq!(
        field(relay.append_event(id, "", &serde_json::json!(1)).unwrap_err()),
        "event kind"
    );
    assert_eq!(relay.get(id).unwrap().state(), JobState::Leased);
    assert_eq!(relay.events(id).unwrap().len(), 2);
    relay.ack(id, l.token, None).unwrap();
    let _ = Options::default();
}
