//! Regression (issue 24, item 4): a request cut off by the request deadline
//! was answered 503 `timeout` while its change was still queued at the
//! writer, which then committed it: a client that retried a "timeout"
//! duplicated its job. A change cut off is answered `maybe_applied`.

use relay::{Options, Relay};
use relay_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

mod common;

/// A server with a 400 ms request deadline (lease waits up to 100 ms) on a
/// new file: the directory, the Relay, the server and its URL.
fn short_deadline_server() -> (tempfile::TempDir, Relay, common::ServerThread, String) {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open_with(dir.path().join("t.db"), Options::default()).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.max_wait = Duration::from_millis(100);
    config.request_timeout = Duration::from_millis(400);
    let server = common::ServerThread::start(relay.clone(), config);
    let base = format!("http://{}", server.addr);
    (dir, relay, server, base)
}

#[test]
fn a_change_cut_off_by_the_deadline_is_answered_maybe_applied() {
    let (_dir, relay, _server, base) = short_deadline_server();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    // The writer held past the deadline, as by a disk that stalls.
    let hold = relay.hold_writer().expect("a writer");
    let mut res = agent
        .post(&format!("{base}/v1/jobs"))
        .send_json(json!({"queue": "q", "kind": "k"}))
        .unwrap();
    let status = res.status().as_u16();
    let body: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
    drop(hold);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["code"], "maybe_applied", "{body}");
    // Issue 39, item 7: what makes a retry safe is the idempotency key
    // (a unique key dedupes only while its job is unfinished).
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("idempotency key") && !message.contains("unique_key"),
        "{message}"
    );
    // It was applied after all: what the answer had to allow for.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !relay.stats().unwrap().queues.contains_key("q") {
        assert!(
            std::time::Instant::now() < deadline,
            "the held submit was never committed"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A lease changes its jobs too; reads go on as before.
    let hold = relay.hold_writer().expect("a writer");
    let mut res = agent
        .post(&format!("{base}/v1/lease"))
        .send_json(json!({"queues": ["q"]}))
        .unwrap();
    let body: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
    drop(hold);
    assert_eq!(
        body["error"]["code"], "maybe_applied",
        "a lease changes the job too: {body}"
    );
    let mut res = agent.get(&format!("{base}/v1/stats")).call().unwrap();
    assert_eq!(
        res.status().as_u16(),
        200,
        "{}",
        res.body_mut().read_to_string().unwrap()
    );
}

/// Regression (issue 24, item 4): a client that retried a submit answered
/// "timeout" (now `maybe_applied`) made a second job. With an idempotency
/// key (the header, or the body's field), the retry answers the first
/// submit's job and nothing new is made.
#[test]
fn a_submit_retried_with_its_idempotency_key_makes_one_job() {
    let (_dir, relay, _server, base) = short_deadline_server();
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let submit = |key: &str, body: Value| {
        let mut res = agent
            .post(&format!("{base}/v1/jobs"))
            .header("Idempotency-Key", key)
            .send_json(body)
            .unwrap();
        let status = res.status().as_u16();
        let body: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
        (status, body)
    };
    let hold = relay.hold_writer().expect("a writer");
    let (status, body) = submit("order-1", json!({"queue": "q", "kind": "k", "payload": 1}));
    drop(hold);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (503, Some("maybe_applied")),
        "{body}"
    );
    // The retry: whether or not the first was committed yet, one job.
    let (status, again) = submit("order-1", json!({"queue": "q", "kind": "k", "payload": 2}));
    assert!(status == 200 || status == 201, "{status} {again}");
    let id = again["id"].as_i64().unwrap();
    let (status, third) = submit("order-1", json!({"queue": "q", "kind": "k", "payload": 3}));
    assert_eq!(
        (status, third["id"].as_i64(), third["existing"].as_bool()),
        (200, Some(id), Some(true))
    );
    let stats = relay.stats().unwrap();
    assert_eq!(stats.queues["q"].counts[&relay::JobState::Ready], 1, "{stats:?}");
    assert_eq!(relay.get(relay::JobId(id)).unwrap().payload, b"1");
    // The body's field says the same; given both, the body's counts.
    let (status, by_field) = submit(
        "order-1",
        json!({"queue": "q", "kind": "k", "idempotency_key": "order-1"}),
    );
    assert_eq!((status, by_field["id"].as_i64()), (200, Some(id)));
    let (status, body_wins) = submit(
        "order-1",
        json!({"queue": "q", "kind": "k", "idempotency_key": "order-2"}),
    );
    assert_eq!(status, 201, "{body_wins}");
    // A header that is empty or too long is refused.
    for bad in ["", &"k".repeat(251)] {
        let (status, refused) = submit(bad, json!({"queue": "q", "kind": "k"}));
        assert_eq!(status, 400, "{refused}");
    }
    // The job a key made, deleted since: 404, and no new job.
    let gone = body_wins["id"].as_i64().unwrap();
    relay.delete(relay::JobId(gone)).unwrap();
    let (status, answer) = submit("x", json!({"queue": "q", "kind": "k", "idempotency_key": "order-2"}));
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{answer}"
    );
    // A batch: each job keyed by its index; a repeat answers the same ids.
    let batch = |key: &str| {
        let mut res = agent
            .post(&format!("{base}/v1/jobs/batch"))
            .header("Idempotency-Key", key)
            .send_json(json!({"jobs": [{"queue": "b", "kind": "k"}, {"queue": "b", "kind": "k"}]}))
            .unwrap();
        let body: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
        body["ids"].clone()
    };
    let first = batch("import-9");
    assert_eq!(first.as_array().map(Vec::len), Some(2), "{first}");
    assert_eq!(batch("import-9"), first);
    assert_eq!(relay.stats().unwrap().queues["b"].counts[&relay::JobState::Ready], 2);
}
