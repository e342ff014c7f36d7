//! Issue 39, item 5: any caller with an API token could append events to
//! any job without its lease, without bound (50,000 appended events made
//! a 15 MB log and a 20.6 MB dashboard page). A job's log now takes
//! appended events until it holds `MAX_EVENTS_APPENDED` (10,000) events;
//! past that an append fails alone, with a typed error naming the bound,
//! and changes nothing; the engine's own events are still kept. Seen
//! failing before the bound: the 10,001st append was taken.

use relay::{Error, LeaseRequest, NewJob, Relay};
use serde_json::json;

#[test]
fn a_jobs_log_takes_appended_events_up_to_its_bound() {
    let relay = Relay::in_memory().unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    // Event 1 is `submitted`: 9,999 appends fill the log.
    for i in 0..9_999 {
        relay.append_event(id, "note", &json!({ "i": i })).unwrap();
    }
    let err = relay.append_event(id, "note", &json!({})).unwrap_err();
    match &err {
        Error::InvalidInput(e) => {
            assert_eq!(e.field, "events");
            assert!(e.reason.contains("10000 events"), "{e}");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        relay.events(id).unwrap().len(),
        10_000,
        "the refused append changed nothing"
    );
    // The engine's own events go on: a lease and an ack are logged.
    let leased = relay.lease(LeaseRequest::new(["q"])).unwrap();
    relay.ack(leased[0].id, leased[0].token, None).unwrap();
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(kinds.len(), 10_002);
    assert_eq!(&kinds[10_000..], ["leased", "succeeded"]);
}
