//! The worker protocol over a real HTTP listener: `POST /v1/work` (outcomes
//! and the next lease in one call) and `POST /v1/heartbeat` (many leases
//! extended at once), each item answered on its own, a repeated call
//! applying nothing twice, a malformed call refused whole.

use relay::{Options, Relay};
use relay_server::ServerConfig;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

mod common;

struct Served {
    base: String,
    _server: common::ServerThread,
    _dir: tempfile::TempDir,
}

fn serve() -> Served {
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        poll_interval: Duration::from_secs(3600),
        ..Options::default()
    };
    let relay = Relay::open_with(dir.path().join("w.db"), options).unwrap();
    let server = common::ServerThread::start(relay, ServerConfig::new("127.0.0.1:0".parse().unwrap()));
    Served {
        base: format!("http://{}", server.addr),
        _server: server,
        _dir: dir,
    }
}

impl Served {
    /// Sends `body` and returns the status, the body's text and its JSON.
    fn raw(&self, method: &str, path: &str, body: Option<Value>) -> (u16, String, Value) {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into();
        let url = format!("{}{path}", self.base);
        let mut res = match body {
            None => agent.get(&url).call(),
            Some(b) if method == "POST" => agent.post(&url).send_json(&b),
            Some(_) => panic!("{method} is not needed here"),
        }
        .unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        let v = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, text, v)
    }

    fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let (st, _, v) = self.raw("POST", path, Some(body));
        (st, v)
    }

    fn get(&self, path: &str) -> Value {
        self.raw("GET", path, None).2
    }

    fn submit(&self, job: Value) -> i64 {
        let (st, v) = self.post("/v1/jobs", job);
        assert_eq!(st, 201, "{v}");
        v["id"].as_i64().unwrap()
    }

    fn state(&self, id: i64) -> String {
        self.get(&format!("/v1/jobs/{id}"))["state"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    fn event_kinds(&self, id: i64) -> Vec<String> {
        self.get(&format!("/v1/jobs/{id}/events"))["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["kind"].as_str().unwrap().to_owned())
            .collect()
    }
}

fn code(item: &Value) -> &str {
    item["error"]["code"].as_str().unwrap_or("")
}

/// Leases `n` jobs of `q` through `/v1/work`; returns (id, token) pairs.
fn lease(s: &Served, q: &str, n: u32) -> Vec<(i64, i64)> {
    let (st, v) = s.post("/v1/work", json!({"lease": {"queues": [q], "max": n}}));
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["outcomes"], json!([]));
    v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| (j["id"].as_i64().unwrap(), j["token"].as_i64().unwrap()))
        .collect()
}

#[test]
fn a_mixed_work_call_answers_each_item_on_its_own_and_a_repeat_applies_nothing_twice() {
    let s = serve();
    let payload = r#"{"b":1,"a":12345678901234567890123,"c":1E2}"#;
    let ids: Vec<i64> = (0..4)
        .map(|n| s.submit(json!({"queue": "q", "kind": "k", "max_attempts": if n == 2 { 1 } else { 5 }})))
        .collect();
    let held = lease(&s, "q", 4);
    assert_eq!(held.iter().map(|h| h.0).collect::<Vec<_>>(), ids);
    // Two more to be leased by the same call that reports the outcomes.
    // Sent as text: a JSON value in this test would already reorder it.
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let body = format!(r#"{{"queue":"q","kind":"k","payload":{payload}}}"#);
    let res = agent
        .post(&format!("{}/v1/jobs", s.base))
        .content_type("application/json")
        .send(&body)
        .unwrap();
    assert_eq!(res.status().as_u16(), 201);
    s.submit(json!({"queue": "q", "kind": "k"}));
    let call = json!({
        "outcomes": [
            {"id": held[0].0, "token": held[0].1, "outcome": "ack", "result": {"sent": true}},
            {"id": held[1].0, "token": held[1].1 + 1, "outcome": "ack"},
            {"id": held[2].0, "token": held[2].1, "outcome": "nack", "error": "boom"},
            {"id": held[3].0, "token": held[3].1, "outcome": "release", "in_ms": 60000},
            {"id": 999, "token": 1, "outcome": "ack"}
        ],
        "lease": {"queues": ["q"], "max": 10, "wait_ms": 30000, "worker": "w"}
    });
    let t = Instant::now();
    let (st, text, v) = s.raw("POST", "/v1/work", Some(call.clone()));
    assert_eq!(st, 200, "{text}");
    assert!(t.elapsed() < Duration::from_secs(20), "with outcomes it does not wait");
    let items = v["outcomes"].as_array().unwrap();
    assert_eq!(items.len(), 5);
    assert_eq!(
        (items[0]["id"].as_i64(), items[0]["state"].as_str()),
        (Some(held[0].0), Some("SUCCEEDED"))
    );
    assert_eq!(code(&items[1]), "lease_lost", "{}", items[1]);
    assert_eq!(items[2]["state"], "DEAD", "max_attempts 1: {}", items[2]);
    assert_eq!(items[3]["state"], "SCHEDULED");
    assert!(items[3]["ready_at"].is_string(), "{}", items[3]);
    assert_eq!(code(&items[4]), "not_found");
    let leased: Vec<i64> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        leased.len(),
        2,
        "the two new jobs; the snoozed one is not due: {leased:?}"
    );
    assert!(
        text.contains(payload),
        "the payload goes out as stored, keys in order and numbers as written: {text}"
    );
    assert_eq!(s.state(held[1].0), "LEASED", "the stale ack changed nothing");

    // The answer was lost; the client sends the same call again.
    let (st, v) = s.post("/v1/work", call);
    assert_eq!(st, 200, "{v}");
    let items = v["outcomes"].as_array().unwrap();
    assert_eq!(items[0]["state"], "SUCCEEDED", "a repeated ack is answered Ok");
    assert!(items[1..4].iter().all(|i| i["error"].is_object()), "{items:?}");
    for (id, kind) in [(held[0].0, "succeeded"), (held[2].0, "failed"), (held[3].0, "snoozed")] {
        let kinds = s.event_kinds(id);
        assert_eq!(kinds.iter().filter(|k| *k == kind).count(), 1, "job {id}: {kinds:?}");
    }
    assert_eq!(
        s.get(&format!("/v1/jobs/{}", held[0].0))["result"],
        json!({"sent": true})
    );
}

#[test]
fn a_malformed_work_call_is_refused_whole_and_changes_nothing() {
    let s = serve();
    let id = s.submit(json!({"queue": "q", "kind": "k"}));
    let (_, token) = lease(&s, "q", 1)[0];
    let ok = json!({"id": id, "token": token, "outcome": "ack"});
    for (bad, why) in [
        (
            json!({"id": id, "token": token, "outcome": "ack", "error": "x"}),
            "a nack's field on an ack",
        ),
        (
            json!({"id": id, "token": token, "outcome": "nack"}),
            "a nack without its error",
        ),
        (
            json!({"id": id, "token": token, "outcome": "release", "permanent": true}),
            "a nack's field on a release",
        ),
        (
            json!({"id": id, "token": token, "outcome": "done"}),
            "an unknown outcome",
        ),
        (json!({"id": id, "outcome": "ack"}), "no token"),
        (
            json!({"id": id, "token": token, "outcome": "ack", "result": 1, "result_base64": "AA=="}),
            "both results",
        ),
    ] {
        let (st, v) = s.post("/v1/work", json!({"outcomes": [ok.clone(), bad]}));
        assert_eq!((st, code(&v)), (400, "invalid_request"), "{why}: {v}");
    }
    let (st, v) = s.post(
        "/v1/work",
        json!({"outcomes": [ok.clone()], "lease": {"queues": ["bad name"]}}),
    );
    assert_eq!((st, code(&v)), (400, "invalid_input"), "a bad lease: {v}");
    assert_eq!(s.state(id), "LEASED", "no refused call applied its valid ack");
    let (st, v) = s.post("/v1/work", json!({"outcomes": [ok]}));
    assert_eq!(
        (st, v["outcomes"][0]["state"].as_str()),
        (200, Some("SUCCEEDED")),
        "{v}"
    );
    assert_eq!(v["jobs"], json!([]), "no lease asked, none made");
}

#[test]
fn a_work_call_without_outcomes_long_polls_until_a_submit() {
    let s = serve();
    let base = s.base.clone();
    let submitter = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(300));
        let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
        agent
            .post(&format!("{base}/v1/jobs"))
            .send_json(json!({"queue": "later", "kind": "k"}))
            .unwrap();
    });
    let t = Instant::now();
    let (st, v) = s.post("/v1/work", json!({"lease": {"queues": ["later"], "wait_ms": 30000}}));
    submitter.join().unwrap();
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(1), "{v}");
    assert!(
        t.elapsed() < Duration::from_secs(20),
        "woken by the submit, not the wait's end"
    );
}

#[test]
fn a_heartbeat_answers_each_lease_on_its_own() {
    let s = serve();
    for _ in 0..3 {
        s.submit(json!({"queue": "q", "kind": "k", "lease_for_ms": 5000}));
    }
    let held = lease(&s, "q", 3);
    let (st, _) = s.post(&format!("/v1/jobs/{}/cancel", held[1].0), json!({}));
    assert_eq!(st, 200);
    let before = s.get(&format!("/v1/jobs/{}", held[0].0))["lease_expires_at"].clone();
    let (st, v) = s.post(
        "/v1/heartbeat",
        json!({"leases": [
            {"id": held[0].0, "token": held[0].1, "lease_for_ms": 600000},
            {"id": held[1].0, "token": held[1].1},
            {"id": held[2].0, "token": held[2].1 + 5},
            {"id": 999, "token": 1}
        ], "lease_for_ms": 60000}),
    );
    assert_eq!(st, 200, "{v}");
    let items = v["leases"].as_array().unwrap();
    let after = s.get(&format!("/v1/jobs/{}", held[0].0))["lease_expires_at"].clone();
    assert_eq!(items[0]["lease_expires_at"], after, "{v}");
    assert!(after.as_str() > before.as_str(), "extended: {before} -> {after}");
    assert_eq!(code(&items[1]), "invalid_state", "cancelled: {}", items[1]);
    assert_eq!(code(&items[2]), "lease_lost");
    assert_eq!(code(&items[3]), "not_found");
    // A worker holding nothing renews nothing (issue 42: this was a 400).
    let (st, v) = s.post("/v1/heartbeat", json!({"leases": []}));
    assert_eq!((st, &v), (200, &json!({"leases": []})), "{v}");
}

/// Regression (issue 24, item 5): every HTTP view re-parsed payloads into
/// `serde_json::Value`, so keys came back sorted, duplicates collapsed and
/// numbers rounded (`12345678901234567890123` as `1.2345678901234568e+22`,
/// `1E2` as `100.0`). A worker checking a signature over its payload
/// failed; `1e999` and nesting past 128 came back as `payload_base64`. The
/// job, the list and the lease answer now carry the text stored, whatever
/// JSON it is.
#[test]
fn payloads_come_back_as_the_text_stored_in_every_view() {
    let s = serve();
    let payload = r#"{"b":1,"a":12345678901234567890123,"c":1E2,"d":-0.0,"f":{"x":1,"x":2}}"#;
    let agent: ureq::Agent = ureq::Agent::config_builder().build().into();
    let body = format!(r#"{{"queue":"q","kind":"k","payload":{payload}}}"#);
    let mut res = agent
        .post(&format!("{}/v1/jobs", s.base))
        .content_type("application/json")
        .send(&body)
        .unwrap();
    let id: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
    let id = id["id"].as_i64().unwrap();
    let (_, one, _) = s.raw("GET", &format!("/v1/jobs/{id}"), None);
    assert!(one.contains(payload), "GET /v1/jobs/{id}: {one}");
    let (_, page, _) = s.raw("GET", "/v1/jobs?queue=q", None);
    assert!(page.contains(payload), "GET /v1/jobs: {page}");
    let (_, leased, _) = s.raw("POST", "/v1/lease", Some(json!({"queues": ["q"]})));
    assert!(leased.contains(payload), "POST /v1/lease: {leased}");
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    for text in ["1e999", &deep] {
        let body = format!(r#"{{"queue":"r","kind":"k","payload":{text}}}"#);
        let mut res = agent
            .post(&format!("{}/v1/jobs", s.base))
            .content_type("application/json")
            .send(&body)
            .unwrap();
        let id: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
        let (_, one, _) = s.raw("GET", &format!("/v1/jobs/{}", id["id"]), None);
        assert!(one.contains(&format!(r#""payload":{text}"#)), "GET: {one}");
    }
}

/// Issue 40 item 7: step records ride on `POST /v1/work` beside other
/// outcomes and the next lease, one call and one commit: a record under the
/// lease's token is kept (the job still LEASED), the first of a name stands
/// and is answered as `earlier` to a second, a stale token is refused alone
/// (`lease_lost`, nothing written) beside an ack that lands, and the job's
/// next lease carries what was recorded. A step outcome with a stray field
/// or without its name is refused whole.
#[test]
fn step_records_ride_on_the_work_call_each_answered_on_its_own() {
    let s = serve();
    let a = s.submit(json!({"queue": "q", "kind": "k", "max_attempts": 5}));
    let b = s.submit(json!({"queue": "q", "kind": "k"}));
    let leased = lease(&s, "q", 2);
    let token = |id: i64| leased.iter().find(|l| l.0 == id).unwrap().1;
    let (ta, tb) = (token(a), token(b));
    let (st, v) = s.post(
        "/v1/work",
        json!({"outcomes": [
            {"id": a, "token": ta, "outcome": "step", "step": "charge", "output": {"charge": "ch_1"}},
            {"id": a, "token": ta, "outcome": "step", "step": "charge", "output": {"charge": "ch_2"}},
            {"id": a, "token": ta, "outcome": "step", "step": "pdf", "output_base64": "gAE="},
            {"id": a, "token": ta + 1000, "outcome": "step", "step": "stale", "output": 1},
            {"id": b, "token": tb, "outcome": "ack"},
        ]}),
    );
    assert_eq!(st, 200, "{v}");
    let o = v["outcomes"].as_array().unwrap();
    assert_eq!(o.len(), 5, "{v}");
    assert_eq!(
        (o[0]["state"].as_str(), o[0].get("earlier")),
        (Some("LEASED"), None),
        "{v}"
    );
    assert_eq!(o[1]["earlier"]["output"], json!({"charge": "ch_1"}), "{v}");
    assert_eq!(o[1]["earlier"]["attempt"], 1, "{v}");
    assert_eq!(o[2]["state"], "LEASED", "{v}");
    assert_eq!(code(&o[3]), "lease_lost", "{v}");
    assert_eq!(o[4]["state"], "SUCCEEDED", "{v}");
    assert_eq!(s.state(a), "LEASED");
    let job = s.get(&format!("/v1/jobs/{a}"));
    let names: Vec<&str> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["charge", "pdf"], "{job}");
    assert_eq!(job["steps"][1]["output_base64"], "gAE=");
    // Malformed step outcomes: refused whole, nothing written.
    for bad in [
        json!({"id": a, "token": ta, "outcome": "step", "output": 1}),
        json!({"id": a, "token": ta, "outcome": "step", "step": "x", "result": 1}),
        json!({"id": a, "token": ta, "outcome": "step", "step": "x", "output": 1, "output_base64": "AA=="}),
        json!({"id": a, "token": ta, "outcome": "ack", "output": 1}),
        json!({"id": a, "token": ta, "outcome": "step", "step": "", "output": 1}),
    ] {
        let (st, v) = s.post("/v1/work", json!({"outcomes": [bad.clone()]}));
        assert_eq!(st, 400, "{bad} was not refused: {v}");
    }
    // A step and the job's ack in one call, then its steps at the next
    // lease: release it first so that it is leased again.
    let (st, v) = s.post(
        "/v1/work",
        json!({"outcomes": [
            {"id": a, "token": ta, "outcome": "step", "step": "email", "output": "sent"},
            {"id": a, "token": ta, "outcome": "release"},
        ], "lease": {"queues": ["q"], "max": 1}}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["outcomes"][1]["state"], "READY", "{v}");
    let again = &v["jobs"][0];
    assert_eq!(again["id"], a, "{v}");
    let steps: Vec<(&str, &Value)> = again["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| (x["name"].as_str().unwrap(), &x["output"]))
        .collect();
    assert_eq!(
        steps,
        [
            ("charge", &json!({"charge": "ch_1"})),
            ("pdf", &Value::Null),
            ("email", &json!("sent"))
        ],
        "{v}"
    );
}

/// Issue 40 item 5: `GET /v1/jobs/{id}/result?wait_ms=` long-polls a job's
/// end, woken by the commit that ends it (the server's poll is an hour:
/// only the wake-up answers before the wait runs out); answered with the
/// job as it is when the wait runs out first; 404 for an unknown job; a
/// wait that is not a number refused 400.
#[test]
fn a_result_long_poll_is_woken_by_the_commit_that_ends_the_job() {
    let s = serve();
    let id = s.submit(json!({"queue": "q", "kind": "k"}));
    let (_, token) = lease(&s, "q", 1)[0];
    let v = s.get(&format!("/v1/jobs/{id}/result?wait_ms=100"));
    assert_eq!(v["state"], "LEASED", "{v}");
    let base = s.base.clone();
    let acker = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(200));
        let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
        agent
            .post(&format!("{base}/v1/jobs/{id}/ack"))
            .send_json(json!({"token": token, "result": {"total": 42}}))
            .unwrap()
            .status()
            .as_u16()
    });
    let asked = Instant::now();
    let v = s.get(&format!("/v1/jobs/{id}/result?wait_ms=30000"));
    assert!(
        asked.elapsed() < Duration::from_secs(29),
        "not woken by the ack's commit"
    );
    assert_eq!(acker.join().unwrap(), 200);
    assert_eq!(
        (&v["state"], &v["result"]),
        (&json!("SUCCEEDED"), &json!({"total": 42})),
        "{v}"
    );
    let (st, _, v) = s.raw("GET", &format!("/v1/jobs/{}/result?wait_ms=10", id + 100), None);
    assert_eq!((st, code(&json!({"error": v["error"]}))), (404, "not_found"), "{v}");
    let (st, _, v) = s.raw("GET", &format!("/v1/jobs/{id}/result?wait_ms=soon"), None);
    assert_eq!(st, 400, "{v}");
}
