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

/// Issue 39, item 5, in bytes: an appended event's data is at most 4 KiB
/// of JSON, so a job's appended events hold at most 10,000 x 4 KiB (40 MiB)
/// whoever appends them. Past it the append fails alone, naming the bound,
/// and changes nothing. Seen failing before the bound: a 1 MB note was
/// taken (the bound was the payload limit, 1 MiB per event).
#[test]
fn an_appended_events_data_is_bounded_in_bytes() {
    let relay = Relay::in_memory().unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    // A JSON string of n bytes is n - 2 characters between its quotes.
    let note = |n: usize| json!("x".repeat(n - 2));
    relay.append_event(id, "note", &note(4096)).unwrap();
    for n in [4097, 1_000_000] {
        match relay.append_event(id, "note", &note(n)).unwrap_err() {
            Error::InvalidInput(e) => {
                assert_eq!(e.field, "event data");
                assert!(e.reason.contains("at most 4096 bytes"), "{e}");
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(relay.events(id).unwrap().len(), 2, "submitted, then the one note");
}
