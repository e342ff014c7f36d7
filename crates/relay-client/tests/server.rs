//! The client against a real server on a loopback port: every call, the
//! payload's round trip, typed errors, and that each answer's type keeps
//! every field the server sent (a response type that dropped or renamed a
//! field fails here, not in a user's program).

use relay_client::wire::{self, Bytes};
use relay_client::{Client, Error};
use serde_json::{json, Value};
use std::net::SocketAddr;

/// A server on an ephemeral port, in a thread with its own runtime, stopped
/// when dropped.
struct Server {
    addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(tokens: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let relay = relay::Relay::open(dir.path().join("client.db")).unwrap();
        let mut config = relay_server::ServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
        let (addr_tx, addr_rx) = std::sync::mpsc::channel();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let server = relay_server::Server::bind(relay, config).await.unwrap();
                addr_tx.send(server.local_addr().unwrap()).unwrap();
                server
                    .run(async move {
                        let _ = stopped.await;
                    })
                    .await
                    .unwrap();
            });
        });
        Self {
            addr: addr_rx.recv().unwrap(),
            stop: Some(stop),
            thread: Some(thread),
            _dir: dir,
        }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The server's own JSON for a GET, untouched by the client's types.
    fn raw(&self, path: &str) -> Value {
        let mut res = ureq::get(&format!("{}{path}", self.url())).call().unwrap();
        serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap()
    }

    /// As [`Server::raw`], with a bearer token.
    fn raw_with_token(&self, path: &str, token: &str) -> Value {
        let mut res = ureq::get(&format!("{}{path}", self.url()))
            .header("Authorization", &format!("Bearer {token}"))
            .call()
            .unwrap();
        serde_json::from_str(&res.body_mut().read_to_string().unwrap()).unwrap()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `typed` serializes back to exactly `raw`: no field was dropped, renamed
/// or changed on the way through the client's types.
fn same<T: serde::Serialize + std::fmt::Debug>(typed: &T, raw: &Value) {
    assert_eq!(&serde_json::to_value(typed).unwrap(), raw, "typed: {typed:?}");
}

fn lease(queue: &str, max: u32) -> wire::Lease {
    wire::Lease {
        queues: vec![queue.into()],
        worker: Some("w1".into()),
        max: Some(max),
        ..Default::default()
    }
}

/// Regression (issue 24, item 5): the client read payloads into
/// `serde_json::Value`, so keys came back sorted, duplicates collapsed,
/// `12345678901234567890123` rounded, and `1e999` or nesting past 128 made
/// the whole answer unreadable. Now the text stored comes back as it is, in
/// the job, the list, the lease answer and a schedule's job.
#[test]
fn payloads_come_back_as_the_text_stored() {
    let server = Server::start(&[]);
    let c = Client::new(&server.url());
    let deep = format!("{}1{}", "[".repeat(300), "]".repeat(300));
    let texts = [
        r#"{"b":1,"a":12345678901234567890123,"c":1E2,"d":-0.0,"f":{"x":1,"x":2}}"#.to_owned(),
        "1e999".to_owned(),
        deep,
    ];
    let ids: Vec<i64> = texts
        .iter()
        .map(|t| c.submit(&wire::NewJob::new("q", "k", t.as_bytes())).unwrap().id)
        .collect();
    for (id, t) in ids.iter().zip(&texts) {
        assert_eq!(
            c.get(*id).unwrap().payload().unwrap(),
            Bytes::Json(t.clone()),
            "job {id}"
        );
    }
    let page = c
        .list(&wire::ListQuery {
            queue: Some("q".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.jobs.len(), 3);
    for j in &page.jobs {
        let i = ids.iter().position(|id| *id == j.id).unwrap();
        assert_eq!(
            j.payload().unwrap(),
            Bytes::Json(texts[i].clone()),
            "listed job {}",
            j.id
        );
    }
    let leased = c.lease(&lease("q", 3)).unwrap();
    let got: Vec<Bytes> = leased.iter().map(|l| l.payload().unwrap()).collect();
    assert_eq!(got, texts.iter().map(|t| Bytes::Json(t.clone())).collect::<Vec<_>>());
    // The submitted text itself, and 1e999 sent as JSON (not bytes).
    let mut as_json = wire::NewJob::new("q", "k", &[]);
    as_json.payload = Some(serde_json::from_str(&texts[0]).unwrap());
    let id = c.submit(&as_json).unwrap().id;
    assert_eq!(c.get(id).unwrap().payload().unwrap(), Bytes::Json(texts[0].clone()));
    let mut job = wire::NewJob::new("q", "k", &[]);
    job.payload = Some(serde_json::from_str(&texts[0]).unwrap());
    let schedule = wire::NewSchedule {
        cron: None,
        tz: None,
        every_ms: Some(3_600_000),
        job,
    };
    let added = c.put_schedule("hourly", &schedule).unwrap();
    assert_eq!(added.job.payload().unwrap(), Bytes::Json(texts[0].clone()));
    let all = c.schedules().unwrap();
    assert_eq!(all[0].job.payload().unwrap(), Bytes::Json(texts[0].clone()));
}

#[test]
fn every_call_round_trips_and_answers_keep_every_field() {
    let server = Server::start(&[]);
    let c = Client::new(&server.url());

    // Submits: a JSON value, bytes that are not JSON, none, and a batch.
    let json_job = c
        .submit(&wire::NewJob::json("q", "greet", &json!({"b": 1, "a": [1, 2.5, "x"]})).unwrap())
        .unwrap();
    assert!(!json_job.existing);
    let mut bytes_job = wire::NewJob::new("q", "blob", &[0xff, 0x00, b'x']);
    bytes_job.tags = Some(vec!["vip".into()]);
    bytes_job.unique_key = Some("blob-1".into());
    let bytes_id = c.submit(&bytes_job).unwrap().id;
    let again = c.submit(&bytes_job).unwrap();
    assert_eq!((again.id, again.existing), (bytes_id, true), "the unique key's job");
    let empty_id = c.submit(&wire::NewJob::new("q", "empty", &[])).unwrap().id;
    let batch = c
        .submit_batch(vec![
            wire::NewJob::new("other", "k", b"1"),
            wire::NewJob::new("other", "k", b"2"),
        ])
        .unwrap();
    assert_eq!(batch.len(), 2);

    // Payloads come back in the form they were given.
    let got = c.get(json_job.id).unwrap();
    assert_eq!(got.payload().unwrap(), Bytes::Json(r#"{"a":[1,2.5,"x"],"b":1}"#.into()));
    same(&got, &server.raw(&format!("/v1/jobs/{}", json_job.id)));
    let blob = c.get(bytes_id).unwrap();
    assert_eq!(blob.payload().unwrap(), Bytes::Raw(vec![0xff, 0x00, b'x']));
    assert_eq!(blob.tags, ["vip"]);
    same(&blob, &server.raw(&format!("/v1/jobs/{bytes_id}")));
    let none = c.get(empty_id).unwrap();
    assert_eq!(none.payload().unwrap(), Bytes::Empty);
    same(&none, &server.raw(&format!("/v1/jobs/{empty_id}")));

    // Lease, extend, ack with a result; the repeated ack answers success.
    let leased = c.lease(&lease("q", 1)).unwrap();
    assert_eq!(leased.len(), 1);
    let first = &leased[0];
    assert_eq!(first.id, json_job.id, "oldest first");
    assert_eq!(
        first.payload().unwrap(),
        Bytes::Json(r#"{"a":[1,2.5,"x"],"b":1}"#.into())
    );
    let extended = c
        .extend(
            first.id,
            &wire::Extend {
                token: first.token,
                lease_for_ms: Some(60_000),
            },
        )
        .unwrap();
    assert!(extended.lease_expires_at.is_some());
    let ack = wire::Ack::new(first.token, Some(br#"{"sent":true}"#));
    assert_eq!(c.ack(first.id, &ack).unwrap().state, Some(wire::State::Succeeded));
    assert_eq!(
        c.ack(first.id, &ack).unwrap().state,
        Some(wire::State::Succeeded),
        "a retried ack"
    );
    assert_eq!(
        c.get(first.id).unwrap().result().unwrap(),
        Bytes::Json(r#"{"sent":true}"#.into())
    );

    // Nack (retries later), release with a snooze, cancel, retry, delete.
    let two = c.lease(&lease("q", 2)).unwrap();
    assert_eq!(two.len(), 2);
    let nacked = c
        .nack(
            two[0].id,
            &wire::Nack {
                token: two[0].token,
                error: "smtp down".into(),
                retry_in_ms: Some(60_000),
                permanent: false,
            },
        )
        .unwrap();
    assert_eq!(nacked.state, Some(wire::State::Retrying));
    assert!(nacked.ready_at.is_some());
    let snoozed = c
        .release(
            two[1].id,
            &wire::Release {
                token: two[1].token,
                in_ms: Some(60_000),
            },
        )
        .unwrap();
    assert!(snoozed.ready_at.is_some());
    assert_eq!(snoozed.state, Some(wire::State::Scheduled));
    assert_eq!(c.cancel(two[1].id).unwrap().state, Some(wire::State::Cancelled));
    assert_eq!(c.retry(two[1].id).unwrap().state, Some(wire::State::Ready));
    assert!(c.delete(two[1].id).unwrap().deleted);

    // Events: a worker's own, then the log as the server keeps it.
    let appended = c
        .append_event(
            two[0].id,
            &wire::AppendEvent {
                kind: "progress".into(),
                data: json!({"pct": 50}),
            },
        )
        .unwrap();
    let events = c.events(two[0].id).unwrap();
    assert_eq!(
        events.last().map(|e| (e.seq, e.kind.as_str())),
        Some((appended.seq, "progress"))
    );
    same(
        &wire::Events { events, next: None },
        &server.raw(&format!("/v1/jobs/{}/events", two[0].id)),
    );

    // Search by tag, a page at a time; a bulk action by filter.
    let page = c
        .list(&wire::ListQuery {
            tag: Some("vip".into()),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(page.jobs.iter().map(|j| j.id).collect::<Vec<_>>(), [bytes_id]);
    let first_page = c
        .list(&wire::ListQuery {
            limit: Some(2),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(first_page.jobs.len(), 2);
    same(&first_page, &server.raw("/v1/jobs?limit=2"));
    let rest = c
        .list(&wire::ListQuery {
            before: first_page.next,
            ..Default::default()
        })
        .unwrap();
    assert!(rest.jobs.iter().all(|j| Some(j.id) < first_page.next));
    let done = c
        .bulk(&wire::Bulk {
            action: wire::BulkAction::Cancel,
            filter: wire::Filter {
                queue: Some("other".into()),
                ..Default::default()
            },
        })
        .unwrap();
    assert_eq!((done.action.as_str(), done.count), ("cancel", 2));

    // DEAD groups.
    let dead = c.submit(&wire::NewJob::new("q", "doomed", b"")).unwrap().id;
    let mut held = c.lease(&lease("q", 5)).unwrap();
    held.retain(|j| j.id == dead);
    let dead_job = held.pop().expect("the doomed job was leased");
    c.nack(
        dead,
        &wire::Nack {
            token: dead_job.token,
            error: "no such user\nat line 2".into(),
            retry_in_ms: None,
            permanent: true,
        },
    )
    .unwrap();
    let groups = c.dead_groups(100).unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!((groups[0].error.as_str(), groups[0].newest), ("no such user", dead));
    same(&wire::DeadGroups { groups }, &server.raw("/v1/dead?limit=100"));

    // Queues: pause, resume, limits; stats.
    assert!(c.pause("q").unwrap().paused);
    assert!(
        c.lease(&lease("q", 1)).unwrap().is_empty(),
        "a paused queue leases nothing"
    );
    assert!(!c.resume("q").unwrap().paused);
    let limits = wire::Limits {
        max_leased: Some(3),
        rate_limit: Some(wire::Rate {
            limit: 10,
            per_ms: 1_000,
        }),
        poison_after: Some(5),
        max_leased_per_group: Some(2),
    };
    let set = c.set_limits("q", &limits).unwrap();
    assert_eq!((set.poison_after, set.max_leased_per_group), (Some(5), Some(2)));
    assert_eq!((set.max_leased, set.rate_limit), (limits.max_leased, limits.rate_limit));
    let stats = c.stats().unwrap();
    let q = &stats.queues["q"];
    assert_eq!((q.max_leased, q.counts["DEAD"], q.paused), (Some(3), 1, false));
    same(&stats, &server.raw("/v1/stats"));

    // Schedules.
    let mut tick = wire::NewJob::json("q", "report", &json!({"daily": true})).unwrap();
    tick.priority = Some(2);
    let added = c
        .put_schedule(
            "daily",
            &wire::NewSchedule {
                cron: Some("0 6 * * *".into()),
                tz: Some("Europe/Berlin".into()),
                every_ms: None,
                job: tick,
            },
        )
        .unwrap();
    assert_eq!((added.tz.as_deref(), added.job.priority), (Some("Europe/Berlin"), 2));
    assert!(c.pause_schedule("daily").unwrap().paused);
    assert!(!c.resume_schedule("daily").unwrap().paused);
    let all = c.schedules().unwrap();
    assert_eq!(all.len(), 1);
    same(&wire::Schedules { schedules: all }, &server.raw("/v1/schedules"));
    assert!(c.remove_schedule("daily").unwrap().deleted);
    assert!(c.schedules().unwrap().is_empty());
}

#[test]
fn errors_are_typed_and_change_nothing() {
    let server = Server::start(&["s3cret"]);
    let anonymous = Client::new(&server.url());
    let e = anonymous.stats().unwrap_err();
    assert_eq!(
        (e.status(), e.code()),
        (Some(401), Some(wire::ErrorCode::Unauthorized)),
        "{e}"
    );

    let c = Client::new(&server.url()).with_token("s3cret");
    assert_eq!(c.get(999).unwrap_err().code(), Some(wire::ErrorCode::NotFound));
    let bad = c.submit(&wire::NewJob::new("no spaces", "k", b"")).unwrap_err();
    assert_eq!(bad.code(), Some(wire::ErrorCode::InvalidInput), "{bad}");
    let id = c.submit(&wire::NewJob::new("q", "k", b"")).unwrap().id;
    let job = c.lease(&lease("q", 1)).unwrap().remove(0);
    let stale = c.ack(id, &wire::Ack::new(job.token + 1, None)).unwrap_err();
    assert_eq!(stale.code(), Some(wire::ErrorCode::LeaseLost), "{stale}");
    assert_eq!(
        c.get(id).unwrap().state,
        wire::State::Leased,
        "the stale ack changed nothing"
    );
    c.ack(id, &wire::Ack::new(job.token, None)).unwrap();
    let late = c
        .nack(
            id,
            &wire::Nack {
                token: job.token,
                error: "x".into(),
                ..Default::default()
            },
        )
        .unwrap_err();
    assert_eq!(late.code(), Some(wire::ErrorCode::InvalidState), "{late}");

    // Nobody listening: a transport error naming the server.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = Client::new(&format!("http://127.0.0.1:{port}")).stats().unwrap_err();
    assert!(
        matches!(&gone, Error::Transport { url, .. } if url.ends_with(&port.to_string())),
        "{gone:?}"
    );
}

/// What the server reads is the client's type: a field the server does not
/// know is refused, so a misspelt option cannot be silently dropped.
#[test]
fn the_server_reads_its_requests_with_these_types() {
    let server = Server::start(&[]);
    let mut res = ureq::post(&format!("{}/v1/jobs", server.url()))
        .config()
        .http_status_as_error(false)
        .build()
        .send_json(json!({"queue": "q", "kind": "k", "priorty": 2}))
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let body = res.body_mut().read_to_string().unwrap();
    assert!(body.contains("priorty"), "{body}");
    let raw: wire::NewJob = serde_json::from_value(json!({"queue": "q", "kind": "k", "payload": null})).unwrap();
    assert!(
        raw.payload.is_some(),
        "a payload given as null is kept apart from one left out"
    );
}

/// The async client sends the same calls: a long-poll lease that a submit
/// answers, an ack, a typed error, a transport error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_async_client_sends_the_same_calls() {
    use relay_client::AsyncClient;
    let server = Server::start(&["s3cret"]);
    let c = AsyncClient::new(&server.url()).with_token("s3cret");
    let waiting = {
        let c = c.clone();
        tokio::spawn(async move {
            c.lease(&wire::Lease {
                queues: vec!["q".into()],
                wait_ms: Some(10_000),
                ..Default::default()
            })
            .await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let id = c
        .submit(&wire::NewJob::json("q", "k", &json!({"n": 1})).unwrap())
        .await
        .unwrap()
        .id;
    let jobs = waiting.await.unwrap().unwrap();
    assert_eq!(
        jobs.iter().map(|j| j.id).collect::<Vec<_>>(),
        [id],
        "the waiting lease got the new job"
    );
    assert_eq!(jobs[0].payload().unwrap(), Bytes::Json(r#"{"n":1}"#.into()));
    let done = c.ack(id, &wire::Ack::new(jobs[0].token, Some(b"ok"))).await.unwrap();
    assert_eq!(done.state, Some(wire::State::Succeeded));
    let job = c.get(id).await.unwrap();
    assert_eq!(job.result().unwrap(), Bytes::Raw(b"ok".to_vec()));
    same(&job, &server.raw_with_token(&format!("/v1/jobs/{id}"), "s3cret"));
    assert_eq!(c.get(id + 1).await.unwrap_err().code(), Some(wire::ErrorCode::NotFound));
    let anonymous = AsyncClient::new(&server.url());
    assert_eq!(
        anonymous.stats().await.unwrap_err().code(),
        Some(wire::ErrorCode::Unauthorized)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let gone = AsyncClient::new(&format!("http://127.0.0.1:{port}"))
        .stats()
        .await
        .unwrap_err();
    assert!(matches!(gone, Error::Transport { .. }), "{gone:?}");
}
