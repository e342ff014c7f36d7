//! Regression (issue 24, item 14): `/healthz` answered ok while every
//! write failed with a full disk. It now says the store is failing until a
//! write commits again.

use relay::Relay;
use relay_server::ServerConfig;
use relay_sqlite::{Settings, SqliteBackend};
use serde_json::{json, Value};
use std::sync::Arc;

mod common;

fn call(agent: &ureq::Agent, method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut res = match (method, body) {
        ("GET", _) => agent.get(url).call(),
        ("DELETE", _) => agent.delete(url).call(),
        (_, Some(b)) => agent.post(url).send_json(b),
        (_, None) => agent.post(url).send_json(json!({})),
    }
    .unwrap();
    let status = res.status().as_u16();
    let text = res.body_mut().read_to_string().unwrap();
    (status, serde_json::from_str(&text).unwrap_or(Value::Null))
}

#[test]
fn healthz_fails_while_writes_fail_and_recovers_when_one_commits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("full.db");
    drop(Relay::open(&path).unwrap()); // the schema, before the cap
    let settings = Settings {
        max_page_count: Some(64),
        ..Settings::default()
    };
    let backend = Arc::new(SqliteBackend::file(&path).with_settings(settings));
    let relay = Relay::with_backend(backend, relay::Options::default()).unwrap();
    let server = common::ServerThread::start(relay, ServerConfig::new("127.0.0.1:0".parse().unwrap()));
    let base = format!("http://{}", server.addr);
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    assert_eq!(
        call(&agent, "GET", &format!("{base}/healthz"), None),
        (200, json!({"status": "ok"}))
    );

    // Fill the file until a submit fails.
    let big = "x".repeat(2000);
    let mut ids = Vec::new();
    let failed = loop {
        let jobs: Vec<Value> = (0..20)
            .map(|_| json!({"queue": "q", "kind": "k", "payload": big}))
            .collect();
        let (status, body) = call(
            &agent,
            "POST",
            &format!("{base}/v1/jobs/batch"),
            Some(json!({"jobs": jobs})),
        );
        if status != 201 {
            break body;
        }
        ids.extend(body["ids"].as_array().unwrap().iter().filter_map(Value::as_i64));
        assert!(ids.len() < 10_000, "the page cap never bit");
    };
    assert!(
        failed["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("disk full"),
        "{failed}"
    );
    let (status, health) = call(&agent, "GET", &format!("{base}/healthz"), None);
    assert_eq!(status, 503, "{health}");
    assert_eq!(health["status"], "failing");
    assert_eq!(health["stopped"], false);
    assert!(
        health["error"].as_str().unwrap_or_default().contains("disk full"),
        "{health}"
    );
    assert!(health["since"].as_str().is_some_and(|t| t.ends_with('Z')), "{health}");

    // Space comes back (jobs deleted): the delete commits, health is ok.
    for id in ids.iter().take(40) {
        let (status, body) = call(&agent, "DELETE", &format!("{base}/v1/jobs/{id}"), None);
        assert_eq!(status, 200, "{body}");
    }
    assert_eq!(
        call(&agent, "GET", &format!("{base}/healthz"), None),
        (200, json!({"status": "ok"}))
    );
    let (status, _) = call(
        &agent,
        "POST",
        &format!("{base}/v1/jobs"),
        Some(json!({"queue": "q", "kind": "k"})),
    );
    assert_eq!(status, 201);
}
