//! Regression (issue 24, item 4): a request cut off by the request deadline
//! was answered 503 `timeout` while its change was still queued at the
//! writer, which then committed it: a client that retried a "timeout"
//! duplicated its job. A change cut off is answered `maybe_applied`.

use relay::{Options, Relay};
use relay_server::ServerConfig;
use serde_json::{json, Value};
use std::time::Duration;

mod common;

#[test]
fn a_change_cut_off_by_the_deadline_is_answered_maybe_applied() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open_with(dir.path().join("t.db"), Options::default()).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.max_wait = Duration::from_millis(100);
    config.request_timeout = Duration::from_millis(400);
    let server = common::ServerThread::start(relay.clone(), config);
    let base = format!("http://{}", server.addr);
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
