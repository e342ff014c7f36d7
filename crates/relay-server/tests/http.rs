//! The real server on an ephemeral loopback port, driven by a real HTTP
//! client (ureq): the job life cycle, long-poll, auth, every error status.

use relay::{Options, Relay};
use relay_server::{Server, ServerConfig};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

mod common;

struct TestServer {
    base: String,
    token: Option<String>,
    server: common::ServerThread,
    path: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl TestServer {
    fn start(options: Options, configure: impl FnOnce(&mut ServerConfig) + Send + 'static) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("server.db");
        let relay = Relay::open_with(&path, options).unwrap();
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        configure(&mut config);
        let token = config.tokens.first().cloned();
        let server = common::ServerThread::start(relay, config);
        Self {
            base: format!("http://{}", server.addr),
            token,
            server,
            path,
            _dir: dir,
        }
    }

    fn plain() -> Self {
        Self::start(Options::default(), |_| {})
    }

    fn agent() -> ureq::Agent {
        ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(30)))
            .build()
            .into()
    }

    /// Sends `body` (JSON, or nothing) and returns the status and JSON body.
    fn call(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        self.call_as(self.token.as_deref(), method, path, body)
    }

    fn call_as(&self, token: Option<&str>, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let agent = Self::agent();
        let auth = token.map(|t| format!("Bearer {t}"));
        let mut res = match (method, body) {
            ("GET", _) => with_auth(agent.get(&url), auth.as_deref()).call(),
            ("DELETE", _) => with_auth(agent.delete(&url), auth.as_deref()).call(),
            (_, Some(b)) => with_auth(agent.post(&url), auth.as_deref()).send_json(&b),
            // A change without a body is still sent as JSON: a server
            // without tokens refuses anything else (a web form could send it).
            (_, None) => with_auth(agent.post(&url), auth.as_deref())
                .header("Content-Type", "application/json")
                .send_empty(),
        }
        .unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    /// `method` (PUT, PATCH, ...) with a JSON body.
    fn call_method(&self, method: &str, path: &str, body: Value) -> (u16, Value) {
        let url = format!("{}{path}", self.base);
        let auth = self.token.as_deref().map(|t| format!("Bearer {t}"));
        let req = match method {
            "PUT" => Self::agent().put(&url),
            other => panic!("call_method: {other} is not needed yet"),
        };
        let mut res = with_auth(req, auth.as_deref()).send_json(&body).unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn raw_post(&self, path: &str, content_type: &str, body: &str) -> (u16, Value) {
        let mut res = Self::agent()
            .post(&format!("{}{path}", self.base))
            .content_type(content_type)
            .send(body)
            .unwrap();
        let status = res.status().as_u16();
        let text = res.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    }

    fn stop(&mut self) {
        self.server.stop();
    }
}

fn with_auth<B>(req: ureq::RequestBuilder<B>, auth: Option<&str>) -> ureq::RequestBuilder<B> {
    match auth {
        Some(a) => req.header("Authorization", a),
        None => req,
    }
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or("")
}

#[test]
fn the_whole_job_life_cycle() {
    let s = TestServer::plain();
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "emails", "kind": "send", "payload": {"to": "ada"}, "priority": 2})),
    );
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let (st, v) = s.call("POST", "/v1/jobs/batch", Some(json!({"jobs": [{"queue": "emails", "kind": "send"}, {"queue": "other", "kind": "k", "payload_base64": "/wA="}]})));
    assert_eq!((st, v["ids"].as_array().unwrap().len()), (201, 2));

    let (st, v) = s.call(
        "POST",
        "/v1/lease",
        Some(json!({"queues": ["emails"], "worker": "w1", "lease_for_ms": 30000})),
    );
    assert_eq!(st, 200, "{v}");
    let job = &v["jobs"][0];
    assert_eq!(
        (job["id"].as_i64(), &job["payload"], job["attempt"].as_i64()),
        (Some(id), &json!({"to": "ada"}), Some(1)),
        "a JSON payload comes back as JSON"
    );
    let token = job["token"].as_i64().unwrap();

    let (st, _) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/extend"),
        Some(json!({"token": token, "lease_for_ms": 60000})),
    );
    assert_eq!(st, 200);
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/events"),
        Some(json!({"kind": "progress", "data": {"pct": 50}})),
    );
    assert_eq!((st, v["seq"].as_i64()), (201, Some(3)));
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/ack"),
        Some(json!({"token": token, "result": "sent"})),
    );
    assert_eq!((st, v["state"].as_str()), (200, Some("SUCCEEDED")));
    let (_, v) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(
        (v["state"].as_str(), v["result"].as_str(), v["priority"].as_i64()),
        (Some("SUCCEEDED"), Some("sent"), Some(2))
    );
    let (_, v) = s.call("GET", &format!("/v1/jobs/{id}/events"), None);
    let kinds: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["submitted", "leased", "progress", "succeeded"]);

    // nack, release, cancel, retry, delete on the next job
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    let (id2, t2) = (
        v["jobs"][0]["id"].as_i64().unwrap(),
        v["jobs"][0]["token"].as_i64().unwrap(),
    );
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id2}/nack"),
        Some(json!({"token": t2, "error": "smtp down", "retry_in_ms": 0})),
    );
    assert_eq!((st, v["state"].as_str()), (200, Some("READY")));
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    let t3 = v["jobs"][0]["token"].as_i64().unwrap();
    assert_eq!(
        s.call("POST", &format!("/v1/jobs/{id2}/release"), Some(json!({"token": t3})))
            .0,
        200
    );
    // Snoozed: READY again only after in_ms, no attempt spent.
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    let t4 = v["jobs"][0]["token"].as_i64().unwrap();
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id2}/release"),
        Some(json!({"token": t4, "in_ms": 3_600_000})),
    );
    assert_eq!((st, v["state"].as_str()), (200, Some("SCHEDULED")), "{v}");
    assert!(v["ready_at"].as_str().unwrap().ends_with('Z'), "{v}");
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    assert_eq!(v["jobs"], json!([]), "not leased before its time");
    let (_, v) = s.call("GET", &format!("/v1/jobs/{id2}"), None);
    assert_eq!(
        (v["state"].as_str(), v["attempts"].as_i64()),
        (Some("SCHEDULED"), Some(1)),
        "{v}"
    );
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id2}/release"),
        Some(json!({"token": t4, "in_ms": -1})),
    );
    assert_eq!(st, 400, "{v}");
    assert_eq!(s.call("POST", &format!("/v1/jobs/{id2}/cancel"), None).0, 200);
    assert_eq!(s.call("POST", &format!("/v1/jobs/{id2}/retry"), None).0, 200);
    assert_eq!(s.call("DELETE", &format!("/v1/jobs/{id2}"), None).0, 200);
    assert_eq!(s.call("GET", &format!("/v1/jobs/{id2}"), None).0, 404);

    // Pause and resume a queue.
    s.call("POST", "/v1/jobs", Some(json!({"queue": "emails", "kind": "send"})));
    let (st, v) = s.call("POST", "/v1/queues/emails/pause", None);
    assert_eq!((st, &v), (200, &json!({"queue": "emails", "paused": true})));
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    assert_eq!(v["jobs"], json!([]), "a paused queue's jobs are not leased");
    let (_, v) = s.call("GET", "/v1/stats", None);
    assert_eq!(
        (
            v["queues"]["emails"]["paused"].as_bool(),
            v["queues"]["emails"]["READY"].as_i64()
        ),
        (Some(true), Some(1)),
        "{v}"
    );
    let (_, metrics) = s.call("GET", "/metrics", None);
    let metrics = metrics.as_str().unwrap().to_owned();
    assert!(metrics.contains("relay_queue_paused{queue=\"emails\"} 1"), "{metrics}");
    let (st, v) = s.call("POST", "/v1/queues/no%20spaces/pause", None);
    assert_eq!((st, v["error"]["code"].as_str()), (400, Some("invalid_input")), "{v}");
    // Limits: set, shown, refused when they could not work, lifted.
    let (st, v) = s.call_method(
        "PUT",
        "/v1/queues/emails/limits",
        json!({"max_leased": 3, "rate_limit": {"limit": 100, "per_ms": 1000}}),
    );
    assert_eq!(
        (st, &v),
        (
            200,
            &json!({"queue": "emails", "max_leased": 3, "rate_limit": {"limit": 100, "per_ms": 1000}, "poison_after": null})
        )
    );
    let (_, v) = s.call("GET", "/v1/stats", None);
    assert_eq!(
        (
            v["queues"]["emails"]["max_leased"].as_i64(),
            v["queues"]["emails"]["rate_limit"]["per_ms"].as_i64()
        ),
        (Some(3), Some(1000)),
        "{v}"
    );
    for bad in [
        json!({"max_leased": 0}),
        json!({"max_leased": -2}),
        json!({"rate_limit": {"limit": 5, "per_ms": 0}}),
        json!({"rate_limit": {"limit": 5}}),
        json!({"max_leased": 3, "burst": 1}),
        json!([null, null]),
    ] {
        let (st, v) = s.call_method("PUT", "/v1/queues/emails/limits", bad.clone());
        assert_eq!(st, 400, "{bad}: {v}");
    }
    let (_, v) = s.call("GET", "/v1/stats", None);
    assert_eq!(
        v["queues"]["emails"]["max_leased"].as_i64(),
        Some(3),
        "a refused change changed nothing"
    );
    let (st, v) = s.call_method("PUT", "/v1/queues/emails/limits", json!({}));
    assert_eq!(
        (st, v["max_leased"].is_null(), v["rate_limit"].is_null()),
        (200, true, true),
        "{v}"
    );
    let (st, v) = s.call("POST", "/v1/queues/emails/resume", None);
    assert_eq!((st, &v), (200, &json!({"queue": "emails", "paused": false})));
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["emails"]})));
    let id3 = v["jobs"][0]["id"].as_i64().unwrap();
    assert_eq!(s.call("POST", &format!("/v1/jobs/{id3}/cancel"), None).0, 200);
    assert_eq!(s.call("DELETE", &format!("/v1/jobs/{id3}"), None).0, 200);

    let (_, v) = s.call("GET", "/v1/stats", None);
    assert_eq!(v["queues"]["emails"]["SUCCEEDED"], 1);
    assert_eq!(v["queues"]["other"]["READY"], 1);
    let (_, v) = s.call("GET", "/v1/queues", None);
    assert_eq!(v["queues"], json!(["emails", "other"]));
    let (_, v) = s.call("GET", "/v1/jobs?queue=other&state=ready", None);
    assert_eq!(v["jobs"][0]["payload_base64"], "/wA=");
    let (st, v) = s.call("GET", "/metrics", None);
    let text = v.as_str().unwrap();
    assert_eq!(st, 200);
    assert!(
        text.contains("relay_commits_total")
            && text.contains("relay_syncs_total ")
            && text.contains("relay_jobs{queue=\"emails\",state=\"SUCCEEDED\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("relay_http_requests_total{route=\"/v1/jobs\",status=\"201\"} 2"),
        "{text}"
    );
}

/// A long-poll's wait is not request latency: a lease (or a turn of
/// /v1/work without outcomes) that may wait goes to a histogram of its
/// own, so the latency histogram's p99 is not the long-poll timeout.
#[test]
fn long_polls_stay_out_of_the_latency_histogram() {
    let s = TestServer::start(Options::default(), |_| {});
    for _ in 0..3 {
        let (st, _) = s.call("POST", "/v1/lease", Some(json!({"queues": ["idle"], "wait_ms": 300})));
        assert_eq!(st, 200);
    }
    let (st, _) = s.call(
        "POST",
        "/v1/work",
        Some(json!({"lease": {"queues": ["idle"], "wait_ms": 300}})),
    );
    assert_eq!(st, 200);
    assert_eq!(s.call("POST", "/v1/lease", Some(json!({"queues": ["idle"]}))).0, 200);
    let (_, v) = s.call("GET", "/metrics", None);
    let text = v.as_str().unwrap_or_default();
    let line = |name: &str| text.lines().find(|l| l.starts_with(name)).unwrap_or("").to_owned();
    assert_eq!(
        line("relay_http_request_seconds_count{route=\"/v1/lease\"}"),
        "relay_http_request_seconds_count{route=\"/v1/lease\"} 1",
        "{text}"
    );
    assert_eq!(
        line("relay_http_long_poll_seconds_count{route=\"/v1/lease\"}"),
        "relay_http_long_poll_seconds_count{route=\"/v1/lease\"} 3",
        "{text}"
    );
    assert_eq!(
        line("relay_http_long_poll_seconds_count{route=\"/v1/work\"}"),
        "relay_http_long_poll_seconds_count{route=\"/v1/work\"} 1",
        "{text}"
    );
    assert!(
        line("relay_http_request_seconds_count{route=\"/v1/work\"}").is_empty(),
        "{text}"
    );
    // Every request is still counted.
    assert!(
        text.contains("relay_http_requests_total{route=\"/v1/lease\",status=\"200\"} 4"),
        "{text}"
    );
    // The quick lease is in the latency histogram's lowest buckets, the
    // waits (0.3 s each) in the long-polls' 0.5 s bucket and not below 0.1 s.
    assert_eq!(
        line("relay_http_long_poll_seconds_bucket{route=\"/v1/lease\",le=\"0.1\"}"),
        "relay_http_long_poll_seconds_bucket{route=\"/v1/lease\",le=\"0.1\"} 0",
        "{text}"
    );
}

#[test]
fn a_long_poll_is_woken_by_a_submit() {
    // Polling far above the bound below: only the wake-up can pass it.
    let options = Options {
        poll_interval: Duration::from_secs(3600),
        ..Options::default()
    };
    let s = TestServer::start(options, |_| {});
    let start = Instant::now();
    let (st, v) = std::thread::scope(|sc| {
        let waiter = sc.spawn(|| s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "wait_ms": 30000}))));
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(
            s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"}))).0,
            201
        );
        waiter.join().unwrap()
    });
    assert_eq!(st, 200);
    assert_eq!(v["jobs"].as_array().unwrap().len(), 1);
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "woken by the submit, not the wait"
    );
}

#[test]
fn auth_refuses_missing_and_wrong_tokens() {
    let s = TestServer::start(Options::default(), |c| {
        c.tokens = vec!["s3cret-token".into(), "other".into()]
    });
    let (st, v) = s.call_as(None, "GET", "/v1/stats", None);
    assert_eq!((st, code(&v)), (401, "unauthorized"));
    let (st, v) = s.call_as(Some("s3cret-tokeN"), "GET", "/v1/stats", None);
    assert_eq!((st, code(&v)), (401, "unauthorized"));
    assert_eq!(s.call_as(Some("s3cret-token"), "GET", "/v1/stats", None).0, 200);
    assert_eq!(s.call_as(Some("other"), "GET", "/v1/stats", None).0, 200);
    assert_eq!(
        s.call_as(None, "GET", "/healthz", None).0,
        200,
        "health checks need no token"
    );
    assert_eq!(s.call_as(None, "GET", "/metrics", None).0, 401);
}

/// Issue 39, item 7: the scheme of `Authorization` is case-insensitive
/// (RFC 7235 2.1): `bearer` and `BEARER` were refused. Seen failing: 401.
#[test]
fn the_bearer_scheme_is_read_in_any_case() {
    let s = TestServer::start(Options::default(), |c| c.tokens = vec!["s3cret-token".into()]);
    let url = format!("{}/v1/stats", s.base);
    for scheme in ["bearer", "BEARER", "Bearer", "bEaReR"] {
        let res = TestServer::agent()
            .get(&url)
            .header("Authorization", &format!("{scheme} s3cret-token"))
            .call()
            .unwrap();
        assert_eq!(res.status().as_u16(), 200, "{scheme}");
    }
    let res = TestServer::agent()
        .get(&url)
        .header("Authorization", "Basic s3cret-token")
        .call()
        .unwrap();
    assert_eq!(res.status().as_u16(), 401, "another scheme");
}

/// Issue 39, item 7: a huge `wait_ms` was refused with "at most
/// 18446744073709" (the wire's bound) instead of the server's real bound,
/// `--max-wait`. Seen failing: the message named the wire's bound.
#[test]
fn a_wait_over_the_servers_bound_names_that_bound() {
    let s = TestServer::plain();
    for wait in [u64::MAX, 18_446_744_073_710, 3_600_000] {
        let (st, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "wait_ms": wait})));
        assert_eq!(st, 400, "{v}");
        let message = v["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("wait_ms must be at most 60000"), "{wait}: {message}");
    }
}

/// Issue 42: a worker holding no jobs renews none: `POST /v1/heartbeat`
/// with no leases answers none (the clients' "work + heartbeat" examples
/// crashed on the 400 once their queue was empty). Seen failing before:
/// 400 "leases must hold 1-10000 items". A bad length is still refused.
#[test]
fn an_empty_heartbeat_renews_nothing() {
    let s = TestServer::plain();
    let (st, v) = s.call("POST", "/v1/heartbeat", Some(json!({"leases": []})));
    assert_eq!((st, &v), (200, &json!({"leases": []})), "{v}");
    let (st, v) = s.call("POST", "/v1/heartbeat", Some(json!({"leases": [], "lease_for_ms": 0})));
    assert_eq!(st, 400, "{v}");
}

/// Issue 39, item 4: `GET /v1/jobs/{id}/events` ignored `limit` and
/// answered every event at once (50,000 events: one 15 MB answer). It now
/// answers a page of at most `limit` events and 4 MiB, with `next`. Seen
/// failing before: `?limit=2` answered all 8 events, without `next`.
#[test]
fn a_jobs_events_come_a_bounded_page_at_a_time() {
    let s = TestServer::plain();
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"})));
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let big = "e".repeat(900_000);
    // An appended event holds at most 4 KiB now (issue 39, item 5)...
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/events"),
        Some(json!({"kind": "note", "data": {"text": big}})),
    );
    assert_eq!((st, &v["error"]["code"]), (400, &json!("invalid_input")), "{v}");
    // ...but a log from before that bound, or written by another program,
    // may hold big events: 7 of 900 KB, written beside the server.
    let db = relay::rusqlite::Connection::open(&s.path).unwrap();
    db.busy_timeout(Duration::from_secs(10)).unwrap();
    for seq in 2..=8 {
        db.execute(
            "INSERT INTO job_events (job_id, seq, at, kind, data) VALUES (?1, ?2, 0, 'note', ?3)",
            relay::rusqlite::params![id, seq, json!({"i": seq, "text": big}).to_string()],
        )
        .unwrap();
    }
    drop(db);
    let (st, v) = s.call("GET", &format!("/v1/jobs/{id}/events?limit=2"), None);
    assert_eq!(st, 200, "{v}");
    let seqs = |v: &Value| -> Vec<i64> {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["seq"].as_i64().unwrap())
            .collect()
    };
    assert_eq!(seqs(&v), vec![1, 2]);
    assert_eq!(v["next"], 2);
    // By bytes: 8 events of up to 900 KB are more than one page of 4 MiB.
    let (mut after, mut pages, mut all) = (0, 0, Vec::new());
    loop {
        let (st, v) = s.call("GET", &format!("/v1/jobs/{id}/events?after={after}"), None);
        assert_eq!(st, 200);
        let text = v.to_string();
        assert!(text.len() < (4 << 20) + 1_000_000, "a page of {} bytes", text.len());
        all.extend(seqs(&v));
        pages += 1;
        match v["next"].as_i64() {
            Some(n) => after = n,
            None => break,
        }
    }
    assert_eq!(all, (1..=8).collect::<Vec<_>>(), "every event once, in order");
    assert!(pages >= 2, "{pages} pages");
    let (st, v) = s.call("GET", &format!("/v1/jobs/{id}/events?limit=0"), None);
    assert_eq!(st, 400, "{v}");
}

/// Issue 39, item 4: `GET /v1/jobs?limit=1000` over 1 MiB payloads was
/// one 157 MB answer (the server at 494 MB). A page now stops at about
/// `relay::LIST_PAGE_BYTES` (8 MiB) of jobs, with `next`, and is read a
/// few jobs at a time. Seen failing before: one page of all 12 jobs of
/// 900 KB, without `next`.
#[test]
fn a_page_of_jobs_is_bounded_in_bytes() {
    let s = TestServer::plain();
    let big = "p".repeat(900_000);
    let mut ids = Vec::new();
    for _ in 0..12 {
        let (st, v) = s.call(
            "POST",
            "/v1/jobs",
            Some(json!({"queue": "big", "kind": "k", "payload": big})),
        );
        assert_eq!(st, 201, "{v}");
        ids.push(v["id"].as_i64().unwrap());
    }
    ids.reverse(); // the list is newest first
    let (mut seen, mut pages, mut before) = (Vec::new(), 0, None::<i64>);
    loop {
        let path = match before {
            Some(b) => format!("/v1/jobs?queue=big&limit=1000&before={b}"),
            None => "/v1/jobs?queue=big&limit=1000".to_owned(),
        };
        let (st, v) = s.call("GET", &path, None);
        assert_eq!(st, 200);
        let size = v.to_string().len();
        assert!(size <= relay::LIST_PAGE_BYTES + 1_000_000, "a page of {size} bytes");
        seen.extend(v["jobs"].as_array().unwrap().iter().map(|j| j["id"].as_i64().unwrap()));
        pages += 1;
        match v["next"].as_i64() {
            Some(n) => before = Some(n),
            None => break,
        }
    }
    assert_eq!(seen, ids, "every job once, newest first");
    assert!(pages >= 2, "12 jobs of 900 KB in {pages} page(s)");
}

/// Issue 39, item 4: `GET /v1/workers` had no paging (100,000 workers:
/// one 26 MB answer, the dashboard's page 34 MB every 2 s). It now answers
/// pages by id of at most `limit` workers and 4 MiB, with `next`; the
/// dashboard's page shows 200 with a link to the next. Seen failing
/// before: `?limit=10` answered all 30 workers without `next`.
#[test]
fn workers_come_a_bounded_page_at_a_time() {
    let s = TestServer::plain();
    let now = "2026-01-01T00:00:00Z";
    let beat = |running: usize| {
        json!({
            "name": "w", "host": "h", "pid": 1, "queues": ["q"], "concurrency": 4, "version": "t",
            "started_at": now, "beat_every_ms": 5000,
            "running": (0..running).map(|i| json!({"id": i + 1, "token": 1, "since": now})).collect::<Vec<_>>(),
        })
    };
    for i in 0..30 {
        // Fifteen of them run 4,000 jobs each (the most a heartbeat may
        // list is 4,096): about 400 KB apiece.
        let running = if i % 2 == 0 { 4_000 } else { 0 };
        let (st, v) = s.call_method("PUT", &format!("/v1/workers/w{i:03}"), beat(running));
        assert_eq!(st, 200, "{v}");
    }
    let ids = |v: &Value| -> Vec<String> {
        v["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (st, v) = s.call("GET", "/v1/workers?limit=10", None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(ids(&v), (0..10).map(|i| format!("w{i:03}")).collect::<Vec<_>>());
    assert_eq!(v["next"], "w009");
    let (mut after, mut all, mut pages) = (String::new(), Vec::new(), 0);
    loop {
        let path = if after.is_empty() {
            "/v1/workers".to_owned()
        } else {
            format!("/v1/workers?after={after}")
        };
        let (st, v) = s.call("GET", &path, None);
        assert_eq!(st, 200);
        assert!(
            v.to_string().len() < (4 << 20) + 1_000_000,
            "a page of {} bytes",
            v.to_string().len()
        );
        all.extend(ids(&v));
        pages += 1;
        match v["next"].as_str() {
            Some(n) => after = n.to_owned(),
            None => break,
        }
    }
    assert_eq!(
        all,
        (0..30).map(|i| format!("w{i:03}")).collect::<Vec<_>>(),
        "each worker once, by id"
    );
    assert!(
        pages >= 2,
        "15 workers of ~400 KB are more than one 4 MiB page: {pages} page(s)"
    );
}

/// Issue 39, item 5: any client with a token could overwrite another
/// worker's record (`PUT /v1/workers/{id}`). The first heartbeat of an id
/// is answered with a secret; a later one without it, or with another, is
/// refused 403 `forbidden` and changes nothing. Seen failing before: the
/// intruder's heartbeat was taken (200) and renamed the worker.
#[test]
fn a_workers_record_is_written_only_with_its_secret() {
    let s = TestServer::plain();
    let beat = |name: &str, secret: Option<&str>| {
        let mut b =
            json!({"name": name, "concurrency": 1, "started_at": "2026-01-01T00:00:00Z", "beat_every_ms": 5000});
        if let Some(secret) = secret {
            b["secret"] = json!(secret);
        }
        b
    };
    let (st, v) = s.call_method("PUT", "/v1/workers/w1", beat("owner", None));
    assert_eq!(st, 200, "{v}");
    let secret = v["secret"]
        .as_str()
        .expect("the first heartbeat's answer holds a secret")
        .to_owned();
    assert!(secret.len() >= 32, "{secret}");
    for presented in [None, Some("not-the-secret")] {
        let (st, v) = s.call_method("PUT", "/v1/workers/w1", beat("intruder", presented));
        assert_eq!((st, code(&v)), (403, "forbidden"), "{v}");
    }
    let (_, workers) = s.call("GET", "/v1/workers", None);
    assert_eq!(workers["workers"][0]["name"], "owner", "{workers}");
    let (st, v) = s.call_method("PUT", "/v1/workers/w1", beat("owner", Some(&secret)));
    assert_eq!(st, 200, "{v}");
    assert!(v.get("secret").is_none(), "a secret is given once: {v}");
}

#[test]
fn no_token_is_refused_off_loopback() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let relay = Relay::in_memory().unwrap();
    let err = rt
        .block_on(Server::bind(relay, ServerConfig::new("0.0.0.0:0".parse().unwrap())))
        .err()
        .unwrap();
    assert!(err.to_string().contains("without a token"), "{err}");
}

#[test]
fn every_error_status_is_reachable_and_json() {
    let s = TestServer::start(
        Options {
            busy_timeout: Duration::from_millis(200),
            ..Options::default()
        },
        |c| {
            c.max_body_bytes = 4096;
            c.max_waiting = 1;
        },
    );
    // 400: malformed JSON, wrong fields, bad values, bad ids.
    let (st, v) = s.raw_post("/v1/jobs", "application/json", "{not json");
    assert_eq!((st, code(&v)), (400, "invalid_request"), "{v}");
    // A body that is not a JSON object: serde would read an array as a
    // struct with every field left out (`[]` to /v1/work was answered 200).
    for (path, body) in [
        ("/v1/work", "[]"),
        ("/v1/jobs", " [\"q\", \"k\"]"),
        ("/v1/lease", "null"),
    ] {
        let (st, v) = s.raw_post(path, "application/json", body);
        assert_eq!((st, code(&v)), (400, "invalid_request"), "{path} {body}: {v}");
    }
    let (st, v) = s.raw_post("/v1/jobs", "text/plain", "{}");
    assert_eq!(
        (st, code(&v)),
        (403, "forbidden"),
        "without tokens, a change that is not JSON is refused: {v}"
    );
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "colour": "red"})),
    );
    assert_eq!((st, code(&v)), (400, "invalid_request"), "{v}");
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "bad queue", "kind": "k"})));
    assert_eq!((st, code(&v)), (400, "invalid_input"), "{v}");
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "priority": 4})),
    );
    assert_eq!((st, code(&v)), (400, "invalid_input"), "{v}");
    assert_eq!(s.call("GET", "/v1/jobs/abc", None).0, 400);
    assert_eq!(
        s.call(
            "POST",
            "/v1/lease",
            Some(json!({"queues": ["q"], "wait_ms": 3_600_000}))
        )
        .0,
        400
    );
    // 404: unknown job, unknown route.
    let (st, v) = s.call("GET", "/v1/jobs/424242", None);
    assert_eq!((st, code(&v)), (404, "not_found"));
    assert_eq!(s.call("GET", "/v2/nothing", None).0, 404);
    // 409: a stale token; a wrong state.
    let (_, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"})));
    let id = v["id"].as_i64().unwrap();
    // A job never leased has no lease to lose: it says its state (issue 42).
    let (st, v) = s.call("POST", &format!("/v1/jobs/{id}/ack"), Some(json!({"token": 99})));
    assert_eq!((st, code(&v)), (409, "invalid_state"));
    let (st, v) = s.call("POST", &format!("/v1/jobs/{id}/retry"), None);
    assert_eq!((st, code(&v)), (409, "invalid_state"));
    let (st, _) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"]})));
    assert_eq!(st, 200);
    let (st, v) = s.call("POST", &format!("/v1/jobs/{id}/ack"), Some(json!({"token": 99})));
    assert_eq!((st, code(&v)), (409, "lease_lost"));
    // 413: a body over the limit.
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "payload": "x".repeat(10_000)})),
    );
    assert_eq!((st, code(&v)), (413, "payload_too_large"), "{v}");
    // 429: more long-polls than allowed wait at once (one here).
    std::thread::scope(|sc| {
        let first = sc.spawn(|| long_poll(&s, "empty"));
        let v = until_one_waits(&s);
        assert_eq!(code(&v), "too_many_waiting", "{v}");
        // A job ends the first one's wait.
        assert_eq!(
            s.call("POST", "/v1/jobs", Some(json!({"queue": "empty", "kind": "k"})))
                .0,
            201
        );
        let (st, v) = first.join().unwrap();
        assert_eq!((st, v["jobs"].as_array().map(Vec::len)), (200, Some(1)), "{v}");
    });
    // 503: another process holds the database's write lock.
    let other = rusqlite_lock(&s.path);
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"})));
    assert_eq!((st, code(&v)), (503, "busy"), "{v}");
    drop(other);
    assert_eq!(
        s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"}))).0,
        201
    );
}

/// Holds the database's write lock from another connection until dropped.
struct Lock {
    stop: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn rusqlite_lock(path: &std::path::Path) -> Lock {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (stop, stop_rx) = std::sync::mpsc::channel::<()>();
    let path = path.to_owned();
    let thread = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        ready_tx.send(()).unwrap();
        let _ = stop_rx.recv();
        conn.execute_batch("ROLLBACK").unwrap();
    });
    ready_rx.recv().unwrap();
    Lock {
        stop: Some(stop),
        thread: Some(thread),
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

/// A lease of `queue` that waits up to 20 s, sent again if it found the one
/// place for a waiting lease taken (by `until_one_waits`' probe).
fn long_poll(s: &TestServer, queue: &str) -> (u16, Value) {
    loop {
        let (st, v) = s.call("POST", "/v1/lease", Some(json!({"queues": [queue], "wait_ms": 20_000})));
        if st != 429 {
            return (st, v);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// On a server that lets one lease wait (`max_waiting = 1`): returns once
/// another lease is waiting, seen by a probe that would wait too being
/// refused with 429 (how long the other takes to get there depends on the
/// machine's load). Returns the probe's answer.
fn until_one_waits(s: &TestServer) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (st, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["probe"], "wait_ms": 1})));
        if st == 429 {
            return v;
        }
        assert_eq!(st, 200, "{v}");
        assert!(Instant::now() < deadline, "no lease came to wait in 30 s");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn shutdown_answers_waiting_long_polls_empty() {
    let mut s = TestServer::start(Options::default(), |c| c.max_waiting = 1);
    let stop = s.server.take_stop().unwrap();
    let start = Instant::now();
    std::thread::scope(|sc| {
        let waiter = sc.spawn(|| long_poll(&s, "q"));
        until_one_waits(&s);
        stop.send(()).unwrap();
        let (st, v) = waiter.join().unwrap();
        assert_eq!((st, v["jobs"].as_array().map(Vec::len)), (200, Some(0)));
    });
    assert!(start.elapsed() < Duration::from_secs(10));
    s.stop();
}

#[test]
fn a_jobs_own_lease_length_and_timeout_over_http() {
    let s = TestServer::plain();
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "lease_for_ms": 600_000, "timeout_ms": 90_000})),
    );
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let (_, v) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(
        (v["lease_for_ms"].as_i64(), v["timeout_ms"].as_i64()),
        (Some(600_000), Some(90_000)),
        "{v}"
    );
    let (_, v) = s.call(
        "POST",
        "/v1/lease",
        Some(json!({"queues": ["q"], "lease_for_ms": 1000})),
    );
    let job = &v["jobs"][0];
    assert_eq!(
        (job["lease_for_ms"].as_i64(), job["timeout_ms"].as_i64()),
        (Some(600_000), Some(90_000)),
        "{v}"
    );
    for bad in [json!({"lease_for_ms": 0}), json!({"timeout_ms": 86_400_001})] {
        let mut body = json!({"queue": "q", "kind": "k"});
        body.as_object_mut().unwrap().extend(bad.as_object().unwrap().clone());
        let (st, v) = s.call("POST", "/v1/jobs", Some(body));
        assert_eq!(st, 400, "{bad}: {v}");
    }
}

/// A job's W3C trace context: from the body's `traceparent`, else from the
/// request's `traceparent` header (each job of a batch that gives none);
/// returned by get and lease. A malformed field is refused (400, nothing
/// written); a malformed header is passed over, as the W3C recommendation
/// asks of a receiver.
#[test]
fn trace_context_from_the_body_or_the_header() {
    const A: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const B: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let s = TestServer::plain();
    let post = |path: &str, header: Option<&str>, body: Value| -> (u16, Value) {
        let mut req = TestServer::agent().post(format!("{}{path}", s.base));
        if let Some(h) = header {
            req = req.header("traceparent", h);
        }
        let mut res = req.send_json(&body).unwrap();
        let status = res.status().as_u16();
        (
            status,
            serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap(),
        )
    };
    let trace_of = |id: i64| s.call("GET", &format!("/v1/jobs/{id}"), None).1["traceparent"].clone();
    let (st, v) = post("/v1/jobs", Some(A), json!({"queue": "q", "kind": "k"}));
    assert_eq!(st, 201, "{v}");
    assert_eq!(trace_of(v["id"].as_i64().unwrap()), json!(A), "from the header");
    let (_, v) = post(
        "/v1/jobs",
        Some(A),
        json!({"queue": "q", "kind": "k", "traceparent": B}),
    );
    assert_eq!(trace_of(v["id"].as_i64().unwrap()), json!(B), "the body's wins");
    let (_, v) = post("/v1/jobs", Some("00-garbage"), json!({"queue": "q", "kind": "k"}));
    assert_eq!(
        trace_of(v["id"].as_i64().unwrap()),
        Value::Null,
        "a bad header is passed over"
    );
    let (st, v) = post(
        "/v1/jobs/batch",
        Some(B),
        json!({"jobs": [{"queue": "q", "kind": "k"}, {"queue": "q", "kind": "k", "traceparent": A}]}),
    );
    assert_eq!(st, 201, "{v}");
    let ids: Vec<i64> = v["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect();
    assert_eq!((trace_of(ids[0]), trace_of(ids[1])), (json!(B), json!(A)));

    let (st, v) = post(
        "/v1/jobs",
        None,
        json!({"queue": "q", "kind": "k", "traceparent": "00-bad"}),
    );
    assert_eq!((st, code(&v)), (400, "invalid_input"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("traceparent"),
        "{v}"
    );

    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "max": 10})));
    let traces: Vec<&Value> = v["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| &j["traceparent"])
        .collect();
    assert_eq!(
        traces,
        [&json!(A), &json!(B), &Value::Null, &json!(B), &json!(A)],
        "{v}"
    );
}

/// Payloads and results come back in the form they were given: a JSON
/// value as that value (an object stays an object, a string that holds
/// JSON text stays a string), bytes as base64, nothing as null; and what a
/// Rust worker reads is the JSON text as sent.
#[test]
fn payloads_and_results_round_trip_as_given() {
    let s = TestServer::plain();
    let relay = relay::Relay::open(&s.path).unwrap();
    let cases = [
        json!({"payload": {"n": 1, "list": [1, 2.5, "x"]}}),
        json!({"payload": "{\"n\":2}"}),
        json!({"payload": 7}),
        json!({"payload": null}),
        json!({}),
        json!({"payload_base64": "/wA="}),
    ];
    let mut ids = Vec::new();
    for c in &cases {
        let mut body = json!({"queue": "q", "kind": "k"});
        body.as_object_mut().unwrap().extend(c.as_object().unwrap().clone());
        let (st, v) = s.call("POST", "/v1/jobs", Some(body));
        assert_eq!(st, 201, "{c}: {v}");
        ids.push(v["id"].as_i64().unwrap());
    }
    // The stored bytes: the JSON text as sent; raw bytes as they were.
    let stored: Vec<Vec<u8>> = ids
        .iter()
        .map(|id| relay.get(relay::JobId(*id)).unwrap().payload)
        .collect();
    assert_eq!(
        stored[0],
        serde_json::to_vec(&cases[0]["payload"]).unwrap(),
        "the text as sent"
    );
    assert_eq!(stored[1], br#""{\"n\":2}""#.to_vec());
    assert_eq!(
        (&stored[3], &stored[4], &stored[5]),
        (&Vec::new(), &Vec::new(), &vec![0xff, 0x00])
    );
    let got = |id: i64| s.call("GET", &format!("/v1/jobs/{id}"), None).1;
    assert_eq!(got(ids[0])["payload"], json!({"n": 1, "list": [1, 2.5, "x"]}));
    assert_eq!(got(ids[1])["payload"], json!("{\"n\":2}"), "a string stays a string");
    assert_eq!(got(ids[2])["payload"], json!(7));
    assert_eq!(
        (got(ids[3])["payload"].clone(), got(ids[4])["payload"].clone()),
        (Value::Null, Value::Null)
    );
    let bin = got(ids[5]);
    assert_eq!((bin.get("payload"), &bin["payload_base64"]), (None, &json!("/wA=")));
    // Leased the same way, and results likewise.
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "max": 10})));
    let leased = v["jobs"].as_array().unwrap();
    assert_eq!(leased.len(), 6);
    assert_eq!(leased[0]["payload"], json!({"n": 1, "list": [1, 2.5, "x"]}));
    let ack = |i: usize, result: Value| {
        let mut body = json!({"token": leased[i]["token"]});
        body.as_object_mut()
            .unwrap()
            .extend(result.as_object().unwrap().clone());
        s.call("POST", &format!("/v1/jobs/{}/ack", leased[i]["id"]), Some(body))
    };
    assert_eq!(ack(0, json!({"result": {"sent": true}})).0, 200);
    assert_eq!(ack(1, json!({"result": "done"})).0, 200);
    assert_eq!(ack(2, json!({"result_base64": "AAE="})).0, 200);
    let (st, v) = ack(3, json!({"result": 1, "result_base64": "AAE="}));
    assert_eq!((st, code(&v)), (400, "invalid_request"), "not both: {v}");
    assert_eq!(got(ids[0])["result"], json!({"sent": true}));
    assert_eq!(got(ids[1])["result"], json!("done"));
    assert_eq!(got(ids[2])["result_base64"], json!("AAE="));
    assert_eq!(got(ids[3])["state"], "LEASED", "the refused ack changed nothing");
}

/// A submit that finds an unfinished job holding its unique key answers
/// 200 with that id and `"existing": true`; a new job is 201.
#[test]
fn a_deduplicated_submit_says_so() {
    let s = TestServer::plain();
    let body = json!({"queue": "q", "kind": "k", "unique_key": "order-7"});
    let (st, first) = s.call("POST", "/v1/jobs", Some(body.clone()));
    assert_eq!((st, first.get("existing")), (201, None), "{first}");
    let (st, again) = s.call("POST", "/v1/jobs", Some(body));
    assert_eq!(st, 200, "{again}");
    assert_eq!(again, json!({"id": first["id"], "existing": true}));
}

/// Issue 39, item 7: a batch retried with its idempotency key answered
/// 201 as if new, with no word that nothing was written. It now answers
/// 200 with every id in `existing`, as a single submit does. Seen failing
/// before: 201 and no `existing`.
#[test]
fn a_batch_retried_with_its_idempotency_key_says_so() {
    let s = TestServer::plain();
    let send = || {
        let mut res = TestServer::agent()
            .post(&format!("{}/v1/jobs/batch", s.base))
            .header("Idempotency-Key", "import-42")
            .send_json(json!({"jobs": [{"queue": "q", "kind": "a"}, {"queue": "q", "kind": "b"}]}))
            .unwrap();
        let status = res.status().as_u16();
        let v: Value = serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap();
        (status, v)
    };
    let (st, first) = send();
    assert_eq!((st, first.get("existing")), (201, None), "{first}");
    let (st, again) = send();
    assert_eq!(st, 200, "{again}");
    assert_eq!(again["ids"], first["ids"]);
    assert_eq!(again["existing"], first["ids"], "{again}");
    // A batch of one job found and one new is 201, naming the one found.
    let (st, v) = s.call(
        "POST",
        "/v1/jobs/batch",
        Some(json!({"jobs": [{"queue": "q", "kind": "k", "unique_key": "u1"}]})),
    );
    assert_eq!(st, 201, "{v}");
    let held = v["ids"][0].clone();
    let (st, v) = s.call(
        "POST",
        "/v1/jobs/batch",
        Some(json!({"jobs": [{"queue": "q", "kind": "k", "unique_key": "u1"}, {"queue": "q", "kind": "k"}]})),
    );
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["existing"], json!([held]), "{v}");
}

#[test]
fn dependencies_over_http() {
    let s = TestServer::plain();
    let submit = |body: Value| s.call("POST", "/v1/jobs", Some(body));
    let (_, v) = submit(json!({"queue": "q", "kind": "parent"}));
    let parent = v["id"].as_i64().unwrap();
    let (st, v) = submit(json!({"queue": "q", "kind": "child", "depends_on": [parent]}));
    assert_eq!(st, 201, "{v}");
    let child = v["id"].as_i64().unwrap();
    let (st, v) = submit(json!({"queue": "q", "kind": "anyway", "depends_on": [parent, child],
        "on_dependency_failure": "run"}));
    assert_eq!(st, 201, "{v}");
    let anyway = v["id"].as_i64().unwrap();
    let (_, v) = s.call("GET", &format!("/v1/jobs/{anyway}"), None);
    assert_eq!(
        (v["state"].as_str(), v["waiting_on"].as_i64()),
        (Some("WAITING"), Some(2)),
        "{v}"
    );
    let (_, v) = s.call("GET", "/v1/stats", None);
    assert_eq!(v["queues"]["q"]["WAITING"], 2, "{v}");
    let (_, v) = s.call("GET", "/v1/jobs?state=WAITING", None);
    assert_eq!(v["jobs"].as_array().map(Vec::len), Some(2), "{v}");
    // The parent fails for good: the child is cancelled, the other runs anyway.
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"]})));
    let token = v["jobs"][0]["token"].as_i64().unwrap();
    assert_eq!(v["jobs"][0]["id"].as_i64(), Some(parent));
    let (st, v) = s.call(
        "POST",
        &format!("/v1/jobs/{parent}/nack"),
        Some(json!({"token": token, "error": "boom", "permanent": true})),
    );
    assert_eq!(st, 200, "{v}");
    let (_, v) = s.call("GET", &format!("/v1/jobs/{child}"), None);
    assert_eq!(v["state"], "CANCELLED", "{v}");
    let (_, v) = s.call("GET", &format!("/v1/jobs/{anyway}"), None);
    assert_eq!(
        (v["state"].as_str(), v["waiting_on"].as_i64()),
        (Some("READY"), Some(0)),
        "{v}"
    );
    // Bad dependencies: 400 naming the field, and nothing written.
    let (_, before) = s.call("GET", "/v1/stats", None);
    for bad in [
        json!({"depends_on": [0]}),
        json!({"depends_on": "1"}),
        json!({"depends_on": [parent], "on_dependency_failure": "maybe"}),
    ] {
        let mut body = json!({"queue": "q", "kind": "k"});
        body.as_object_mut().unwrap().extend(bad.as_object().unwrap().clone());
        let (st, v) = submit(body);
        assert_eq!(st, 400, "{bad}: {v}");
    }
    let (st, v) = submit(json!({"queue": "q", "kind": "k", "depends_on": [anyway + 100]}));
    assert_eq!((st, code(&v)), (404, "dependency_not_found"), "{v}");
    assert!(
        v["error"]["message"].as_str().unwrap().contains("does not exist"),
        "{v}"
    );
    let (_, after) = s.call("GET", "/v1/stats", None);
    let counts = |v: &Value| {
        let mut q = v["queues"]["q"].clone();
        q.as_object_mut().unwrap().remove("oldest_ready_age_ms");
        q
    };
    assert_eq!(counts(&before), counts(&after));
}

#[test]
fn schedules_over_http() {
    let s = TestServer::plain();
    // payload and payload_base64 are one or the other, even as null (the
    // document says so; schemathesis found the server taking both).
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "payload": "x", "payload_base64": null})),
    );
    assert_eq!(st, 400, "{v}");
    let (st, v) = s.call_method(
        "PUT",
        "/v1/schedules/nightly",
        json!({"cron": "30 2 * * *", "tz": "Europe/Berlin", "job": {"queue": "reports", "kind": "build", "payload": {"full": true}}}),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(
        (
            v["name"].as_str(),
            v["cron"].as_str(),
            v["tz"].as_str(),
            &v["job"]["payload"],
            v["paused"].as_bool()
        ),
        (
            Some("nightly"),
            Some("30 2 * * *"),
            Some("Europe/Berlin"),
            &json!({"full": true}),
            Some(false)
        ),
        "{v}"
    );
    let (st, v) = s.call_method(
        "PUT",
        "/v1/schedules/beat",
        json!({"every_ms": 30000, "job": {"queue": "ops", "kind": "ping"}}),
    );
    assert_eq!((st, v["every_ms"].as_i64()), (200, Some(30000)), "{v}");
    let (_, v) = s.call("GET", "/v1/schedules", None);
    let names: Vec<&str> = v["schedules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["beat", "nightly"]);
    let (st, v) = s.call("POST", "/v1/schedules/beat/pause", None);
    assert_eq!((st, v["paused"].as_bool()), (200, Some(true)));
    let (st, v) = s.call("GET", "/v1/schedules/beat", None);
    assert_eq!(
        (st, v["name"].as_str(), v["every_ms"].as_i64(), v["paused"].as_bool()),
        (200, Some("beat"), Some(30000), Some(true)),
        "one schedule, as stored: {v}"
    );
    let (st, v) = s.call("GET", "/v1/schedules/nightly", None);
    assert_eq!((st, v["cron"].as_str()), (200, Some("30 2 * * *")), "{v}");
    let (st, v) = s.call("POST", "/v1/schedules/beat/resume", None);
    assert_eq!((st, v["paused"].as_bool()), (200, Some(false)));
    for (bad, why) in [
        (json!({"cron": "every day", "job": {"queue": "q", "kind": "k"}}), "cron"),
        (
            json!({"cron": "* * * * *", "tz": "Mars/X", "job": {"queue": "q", "kind": "k"}}),
            "tz",
        ),
        (
            json!({"every_ms": 30000, "tz": "UTC", "job": {"queue": "q", "kind": "k"}}),
            "tz",
        ),
        (
            json!({"cron": "* * * * *", "every_ms": 1000, "job": {"queue": "q", "kind": "k"}}),
            "both",
        ),
        (json!({"job": {"queue": "q", "kind": "k"}}), "neither"),
        (json!({"every_ms": 500, "job": {"queue": "q", "kind": "k"}}), "every"),
        (
            json!({"every_ms": 5000, "job": {"queue": "q", "kind": "k", "delay_ms": 10}}),
            "delay",
        ),
        (json!({"every_ms": 5000}), "no job"),
        (
            json!({"every_ms": 5000, "job": {"queue": "q", "kind": "k", "timeout_ms": 1000}}),
            "timeout",
        ),
    ] {
        let (st, v) = s.call_method("PUT", "/v1/schedules/bad", bad.clone());
        assert_eq!(st, 400, "{why}: {bad}: {v}");
    }
    let (_, v) = s.call("GET", "/v1/schedules", None);
    assert_eq!(
        v["schedules"].as_array().unwrap().len(),
        2,
        "refused schedules changed nothing"
    );
    assert_eq!(s.call("DELETE", "/v1/schedules/beat", None).0, 200);
    let (st, v) = s.call("DELETE", "/v1/schedules/beat", None);
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    assert_eq!(s.call("POST", "/v1/schedules/beat/pause", None).0, 404);
    let (st, v) = s.call("GET", "/v1/schedules/beat", None);
    assert_eq!((st, v["error"]["code"].as_str()), (404, Some("not_found")), "{v}");
    assert!(v["error"]["message"].as_str().unwrap_or("").contains("beat"), "{v}");
}

#[test]
fn the_openapi_document_describes_every_route() {
    let s = TestServer::start(Options::default(), |c| c.tokens = vec!["t".into()]);
    let (st, doc) = s.call_as(None, "GET", "/openapi.json", None);
    assert_eq!(st, 200, "the document needs no token");
    assert_eq!(doc["openapi"], "3.0.3");
    let paths = doc["paths"].as_object().unwrap();
    for (path, methods) in [
        ("/v1/jobs", &["post", "get"][..]),
        ("/v1/jobs/batch", &["post"]),
        ("/v1/jobs/{id}", &["get", "delete"]),
        ("/v1/jobs/{id}/ack", &["post"]),
        ("/v1/jobs/{id}/nack", &["post"]),
        ("/v1/jobs/{id}/extend", &["post"]),
        ("/v1/jobs/{id}/release", &["post"]),
        ("/v1/jobs/{id}/cancel", &["post"]),
        ("/v1/jobs/{id}/retry", &["post"]),
        ("/v1/jobs/{id}/events", &["get", "post"]),
        ("/v1/lease", &["post"]),
        ("/v1/work", &["post"]),
        ("/v1/heartbeat", &["post"]),
        ("/v1/stats", &["get"]),
        ("/v1/queues", &["get"]),
        ("/v1/queues/{queue}/pause", &["post"]),
        ("/v1/queues/{queue}/resume", &["post"]),
        ("/v1/queues/{queue}/limits", &["put"]),
        ("/v1/schedules", &["get"]),
        ("/v1/schedules/{name}", &["get", "put", "delete"]),
        ("/v1/schedules/{name}/pause", &["post"]),
        ("/v1/schedules/{name}/resume", &["post"]),
        ("/healthz", &["get"]),
        ("/metrics", &["get"]),
    ] {
        for m in methods {
            assert!(paths[path].get(*m).is_some(), "{m} {path} is not documented");
        }
    }
    assert_eq!(doc["security"], json!([{"bearer": []}]));
    assert_eq!(
        doc["components"]["schemas"]["Lease"]["properties"]["wait_ms"]["maximum"],
        60000
    );
}

/// A client that timed out and sends its ack again gets 200 again, not
/// `lease_lost` ("drop this job, another worker may hold it"); another token
/// is still refused, told the job's state.
#[test]
fn a_repeated_ack_is_answered_ok() {
    let s = TestServer::plain();
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"})));
    assert_eq!(st, 201);
    let id = v["id"].as_i64().unwrap();
    let (st, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"]})));
    assert_eq!(st, 200);
    let token = v["jobs"][0]["token"].as_i64().unwrap();
    for attempt in 0..2 {
        let (st, v) = s.call("POST", &format!("/v1/jobs/{id}/ack"), Some(json!({"token": token})));
        assert_eq!(st, 200, "attempt {attempt}: {v}");
    }
    let (st, v) = s.call("POST", &format!("/v1/jobs/{id}/ack"), Some(json!({"token": token - 1})));
    assert_eq!((st, code(&v)), (409, "invalid_state"), "{v}");
    assert!(v["error"]["message"].as_str().unwrap().contains("SUCCEEDED"), "{v}");
    let (_, job) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(job["state"], "SUCCEEDED");
}

/// Search, tags, bulk actions and dead groups over HTTP: every query
/// parameter, the `next` cursor, a bulk retry of one kind's DEAD jobs, and
/// bad filters refused with 400 (nothing changed).
#[test]
fn search_tags_bulk_and_dead_groups_over_http() {
    let s = TestServer::plain();
    let submit = |kind: &str, tags: Value| -> i64 {
        let (st, v) = s.call(
            "POST",
            "/v1/jobs",
            Some(json!({"queue": "q", "kind": kind, "max_attempts": 1, "tags": tags})),
        );
        assert_eq!(st, 201, "{v}");
        v["id"].as_i64().unwrap()
    };
    let a = submit("send", json!(["vip", "eu"]));
    let b = submit("send", json!(["eu"]));
    let c = submit("bill", json!([]));
    let (_, v) = s.call("GET", &format!("/v1/jobs/{a}"), None);
    assert_eq!(v["tags"], json!(["vip", "eu"]));
    // Fail all three for good, with errors whose first lines group them.
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "max": 10})));
    for j in v["jobs"].as_array().unwrap() {
        let error = if j["kind"] == "send" {
            "smtp: refused\nline 7"
        } else {
            "card declined"
        };
        let (st, v) = s.call(
            "POST",
            &format!("/v1/jobs/{}/nack", j["id"]),
            Some(json!({"token": j["token"], "error": error, "permanent": true})),
        );
        assert_eq!(st, 200, "{v}");
    }
    let ids = |path: &str| -> (Vec<i64>, Value) {
        let (st, v) = s.call("GET", path, None);
        assert_eq!(st, 200, "{path}: {v}");
        let ids = v["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_i64().unwrap())
            .collect();
        (ids, v["next"].clone())
    };
    assert_eq!(ids("/v1/jobs?tag=eu").0, [b, a]);
    assert_eq!(ids("/v1/jobs?kind=bill").0, [c]);
    assert_eq!(ids("/v1/jobs?state=dead&error_contains=smtp%3A%20refused").0, [b, a]);
    assert_eq!(
        ids("/v1/jobs?since=2000-01-01T00:00:00Z&until=2999-01-01T00:00:00Z").0,
        [c, b, a]
    );
    assert_eq!(ids("/v1/jobs?until=2000-01-01T00:00:00Z").0, Vec::<i64>::new());
    let (first, next) = ids("/v1/jobs?limit=2");
    assert_eq!((first, next.clone()), (vec![c, b], json!(b)));
    let (rest, next) = ids(&format!("/v1/jobs?limit=2&before={next}"));
    assert_eq!((rest, next), (vec![a], Value::Null), "the last page has no next");

    let (st, v) = s.call("GET", "/v1/dead", None);
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["groups"][0]["error"], "smtp: refused");
    assert_eq!(
        (v["groups"][0]["count"].as_u64(), v["groups"][1]["count"].as_u64()),
        (Some(2), Some(1))
    );

    let (st, v) = s.call(
        "POST",
        "/v1/jobs/bulk",
        Some(json!({"action": "retry", "filter": {"state": "DEAD", "kind": "send"}})),
    );
    assert_eq!((st, v.clone()), (200, json!({"action": "retry", "count": 2})), "{v}");
    assert_eq!(ids("/v1/jobs?state=READY").0, [b, a]);

    for (method, path, body) in [
        ("GET", "/v1/jobs?limit=0", None),
        ("GET", "/v1/jobs?tag=a,b", None),
        ("GET", "/v1/jobs?since=yesterday", None),
        ("GET", "/v1/jobs?state=NAPPING", None),
        ("GET", "/v1/dead?limit=5000", None),
        ("POST", "/v1/jobs/bulk", Some(json!({"action": "retry", "filter": {}}))),
        (
            "POST",
            "/v1/jobs/bulk",
            Some(json!({"action": "retry", "filter": {"kind": null}})),
        ),
        (
            "POST",
            "/v1/jobs/bulk",
            Some(json!({"action": "explode", "filter": {"kind": "send"}})),
        ),
        (
            "POST",
            "/v1/jobs/bulk",
            Some(json!({"action": "cancel", "filter": {"queue": "no spaces"}})),
        ),
    ] {
        let (st, v) = s.call(method, path, body);
        assert_eq!(st, 400, "{method} {path}: {v}");
    }
    assert_eq!(
        ids("/v1/jobs?state=READY").0,
        [b, a],
        "the refused calls changed nothing"
    );
}

/// Issue 40: a step recorded over HTTP by the lease's holder is kept on the
/// job (`GET /v1/jobs/{id}`), given with the next lease of the job, and
/// refused 409 `lease_lost` to a worker whose lease expired, after which
/// the job's record is the new holder's. The first record of a name stands
/// and is answered; a body giving both output forms is refused 400.
#[test]
fn a_step_is_recorded_by_the_holder_and_leased_with_the_job() {
    let s = TestServer::plain();
    let (st, v) = s.call(
        "POST",
        "/v1/jobs",
        Some(json!({"queue": "q", "kind": "k", "max_attempts": 5})),
    );
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let lease = |lease_for_ms: u64| {
        let (st, v) = s.call(
            "POST",
            "/v1/lease",
            Some(json!({"queues": ["q"], "lease_for_ms": lease_for_ms, "worker": "w"})),
        );
        assert_eq!(st, 200, "{v}");
        v["jobs"][0].clone()
    };
    let first = lease(300);
    let old = first["token"].as_i64().unwrap();
    assert!(first.get("steps").is_none(), "no steps before any record: {first}");
    let steps = format!("/v1/jobs/{id}/steps");
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": old, "name": "charge", "output": {"charge": "ch_1"}})),
    );
    assert_eq!((st, &v), (200, &json!({"recorded": true})), "{v}");
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": old, "name": "charge", "output": {"charge": "ch_2"}})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["recorded"], false);
    assert_eq!(v["earlier"]["output"], json!({"charge": "ch_1"}), "{v}");
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": old, "name": "pdf", "output_base64": "gAE="})),
    );
    assert_eq!(st, 200, "{v}");
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": old, "name": "x", "output": 1, "output_base64": "gAE="})),
    );
    assert_eq!(st, 400, "{v}");
    // The lease expires; the next holder is leased with the steps.
    std::thread::sleep(Duration::from_millis(400));
    let second = lease(30_000);
    let new = second["token"].as_i64().unwrap();
    assert!(new > old);
    assert_eq!(second["steps"][0]["name"], "charge");
    assert_eq!(second["steps"][0]["output"], json!({"charge": "ch_1"}));
    assert_eq!(second["steps"][0]["attempt"], 1);
    assert_eq!(second["steps"][1]["output_base64"], "gAE=");
    assert_eq!(second["steps"][1]["bytes"], 2);
    // The worker whose lease expired: refused, nothing written.
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": old, "name": "email", "output": "old"})),
    );
    assert_eq!((st, &v["error"]["code"]), (409, &json!("lease_lost")), "{v}");
    let (st, v) = s.call(
        "POST",
        &steps,
        Some(json!({"token": new, "name": "email", "output": "new"})),
    );
    assert_eq!(st, 200, "{v}");
    let (st, job) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(st, 200, "{job}");
    let names: Vec<(&str, &Value, i64)> = job["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                &s["output"],
                s["attempt"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("charge", &json!({"charge": "ch_1"}), 1),
            ("pdf", &Value::Null, 1),
            ("email", &json!("new"), 2)
        ]
    );
}

/// Issue 40: a job waits for an event through the worker protocol (a
/// `wait` outcome of `POST /v1/work`), holding no lease; `POST
/// /v1/events/{key}` wakes it in its own commit with the payload recorded
/// as the wait's step; the lease answer then carries it. A second emit
/// changes nothing; a wait outcome missing its key is refused alone.
#[test]
fn an_event_wakes_a_job_waiting_through_the_worker_protocol() {
    let s = TestServer::plain();
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "k"})));
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "worker": "w"})));
    let token = v["jobs"][0]["token"].as_i64().unwrap();
    let (st, v) = s.call(
        "POST",
        "/v1/work",
        Some(json!({"outcomes": [{"id": id, "token": token, "outcome": "wait", "step": "shipment", "until": "2099-01-01T00:00:00Z"}]})),
    );
    assert_eq!(st, 400, "a wait without its key is refused: {v}");
    let until = relay::Clock::now(&relay::SystemClock)
        .plus(Duration::from_secs(3600))
        .to_rfc3339();
    let (st, v) = s.call(
        "POST",
        "/v1/work",
        Some(json!({"outcomes": [{"id": id, "token": token, "outcome": "wait", "step": "shipment", "key": "shipped/1:a@b", "until": until}]})),
    );
    assert_eq!(st, 200, "{v}");
    assert_eq!(v["outcomes"][0]["state"], "WAITING", "{v}");
    let key = "/v1/events/shipped%2F1:a@b";
    let (st, v) = s.call("POST", key, Some(json!({"payload": {"tracking": "1Z"}})));
    assert_eq!((st, &v), (200, &json!({"first": true, "woken": 1})), "{v}");
    let (st, v) = s.call("POST", key, Some(json!({"payload": "again"})));
    assert_eq!((st, &v), (200, &json!({"first": false, "woken": 0})), "{v}");
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "worker": "w"})));
    let step = &v["jobs"][0]["steps"][0];
    assert_eq!(step["name"], "shipment", "{v}");
    assert_eq!(step["output"], json!({"event": {"tracking": "1Z"}}));
    let (st, v) = s.call(
        "POST",
        "/v1/events/k",
        Some(json!({"payload": 1, "payload_base64": "AA=="})),
    );
    assert_eq!(st, 400, "{v}");
}

/// Issue 40 item 4: on a server with API tokens, a lease holder makes a
/// completion token (`POST /v1/jobs/{id}/tokens`, behind the API token),
/// and its path completes it with no API token at all, once: the job
/// waiting for its key runs on with the payload; a second completion is
/// 409 `token_used`, a wrong secret 404 `token_unknown`, a body that is not
/// JSON 400.
#[test]
fn a_completion_token_is_completed_without_an_api_token() {
    let s = TestServer::start(Options::default(), |c| c.tokens = vec!["s3cret-token".into()]);
    let (st, v) = s.call("POST", "/v1/jobs", Some(json!({"queue": "q", "kind": "approve"})));
    assert_eq!(st, 201, "{v}");
    let id = v["id"].as_i64().unwrap();
    let (_, v) = s.call("POST", "/v1/lease", Some(json!({"queues": ["q"], "worker": "w"})));
    let lease = v["jobs"][0]["token"].as_i64().unwrap();
    let (st, t) = s.call(
        "POST",
        &format!("/v1/jobs/{id}/tokens"),
        Some(json!({"token": lease, "timeout_ms": 3_600_000})),
    );
    assert_eq!(st, 201, "{t}");
    let (path, key) = (
        t["path"].as_str().unwrap().to_owned(),
        t["key"].as_str().unwrap().to_owned(),
    );
    // Without the API token, the token's own call is refused.
    let (st, _) = s.call_as(
        None,
        "POST",
        &format!("/v1/jobs/{id}/tokens"),
        Some(json!({"token": lease, "timeout_ms": 1000})),
    );
    assert_eq!(st, 401);
    let until = t["expires_at"].as_str().unwrap().to_owned();
    let (st, v) = s.call(
        "POST",
        "/v1/work",
        Some(json!({"outcomes": [{"id": id, "token": lease, "outcome": "wait", "step": "approval", "key": key, "until": until}]})),
    );
    assert_eq!((st, &v["outcomes"][0]["state"]), (200, &json!("WAITING")), "{v}");
    // What it waits for (item 6), in GET /v1/jobs/{id}.
    let (_, job) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(
        (
            &job["waiting_for"]["kind"],
            &job["waiting_for"]["token"],
            &job["waiting_for"]["step"]
        ),
        (&json!("token"), &t["id"], &json!("approval")),
        "{job}"
    );
    let wrong = path.replace(&path[path.len() - 20..path.len() - 9], "00000000000");
    let (st, v) = s.call_as(None, "POST", &wrong, Some(json!({"ok": true})));
    assert_eq!((st, &v["error"]["code"]), (404, &json!("token_unknown")), "{v}");
    let agent = TestServer::agent();
    let mut res = agent
        .post(&format!("{}{path}", s.base))
        .header("Content-Type", "application/json")
        .send("not json")
        .unwrap();
    assert_eq!(
        res.status().as_u16(),
        400,
        "{}",
        res.body_mut().read_to_string().unwrap()
    );
    // Anyone may call it, so its body is bounded tighter than the API's.
    let big = json!({"blob": "x".repeat(100 * 1024)});
    let (st, v) = s.call_as(None, "POST", &path, Some(big));
    assert_eq!((st, &v["error"]["code"]), (413, &json!("payload_too_large")), "{v}");
    let (st, v) = s.call_as(None, "POST", &path, Some(json!({"approved_by": "ada"})));
    assert_eq!((st, &v), (200, &json!({"completed": true, "woken": 1})), "{v}");
    let (st, v) = s.call_as(None, "POST", &path, Some(json!({"approved_by": "eve"})));
    assert_eq!((st, &v["error"]["code"]), (409, &json!("token_used")), "{v}");
    let (_, job) = s.call("GET", &format!("/v1/jobs/{id}"), None);
    assert_eq!(job["state"], "READY", "{job}");
    assert_eq!(
        job["steps"][0]["output"],
        json!({"event": {"approved_by": "ada"}}),
        "{job}"
    );
}
