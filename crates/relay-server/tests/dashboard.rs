//! The dashboard over real HTTP (ureq, redirects not followed): login and
//! its cookie, CSRF and cross-site posts refused without changing
//! anything, markup in every field rendered as text under a CSP that
//! forbids inline script, and the actions (bulk by selection and by
//! filter, pause) doing what they say.

mod common;

use relay::{JobId, JobState, LeaseRequest, NewJob, Relay};
use relay_server::ServerConfig;
use std::time::Duration;

struct Dash {
    base: String,
    relay: Relay,
    _server: common::ServerThread,
    _dir: tempfile::TempDir,
}

struct Answer {
    status: u16,
    location: Option<String>,
    cookies: Vec<String>,
    csp: Option<String>,
    body: String,
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .timeout_global(Some(Duration::from_secs(30)))
        .build()
        .into()
}

fn answer(mut res: ureq::http::Response<ureq::Body>) -> Answer {
    let h = res.headers();
    let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned);
    Answer {
        status: res.status().as_u16(),
        location: get("location"),
        cookies: h
            .get_all("set-cookie")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_owned))
            .collect(),
        csp: get("content-security-policy"),
        body: res.body_mut().read_to_string().unwrap_or_default(),
    }
}

fn form(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", enc(k), enc(v)))
        .collect::<Vec<_>>()
        .join("&")
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

impl Dash {
    fn start(tokens: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let relay = Relay::open(dir.path().join("dash.db")).unwrap();
        let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
        config.tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
        let server = common::ServerThread::start(relay.clone(), config);
        Self {
            base: format!("http://{}", server.addr),
            relay,
            _server: server,
            _dir: dir,
        }
    }

    fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        let mut req = agent().get(&format!("{}{path}", self.base));
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        answer(req.call().unwrap())
    }

    fn post(&self, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
        let mut req = agent()
            .post(&format!("{}{path}", self.base))
            .content_type("application/x-www-form-urlencoded");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        answer(req.send(body).unwrap())
    }

    /// A browser's first visit (no tokens): its session cookie and the
    /// CSRF token of the page's forms.
    fn session(&self) -> (String, String) {
        let a = self.get("/", &[]);
        assert_eq!(a.status, 200, "{}", a.body);
        (cookie_of(&a), csrf_of(&a.body))
    }
}

/// `name=value` of the session cookie an answer sets.
fn cookie_of(a: &Answer) -> String {
    let c = a
        .cookies
        .iter()
        .find(|c| c.starts_with("relay_session="))
        .unwrap_or_else(|| panic!("no session cookie in {:?}", a.cookies));
    c.split(';').next().unwrap().to_owned()
}

fn csrf_of(body: &str) -> String {
    let at = body.find(r#"name="csrf" value=""#).expect("a form with a CSRF token") + 19;
    body[at..at + body[at..].find('"').unwrap()].to_owned()
}

#[test]
fn pages_need_a_login_that_sets_a_strict_httponly_cookie() {
    let d = Dash::start(&["s3cret-token"]);
    let a = d.get("/", &[]);
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/login?next=%2F")));
    let a = d.get("/jobs?state=DEAD", &[]);
    assert_eq!(a.location.as_deref(), Some("/login?next=%2Fjobs%3Fstate%3DDEAD"));
    let a = d.get("/login", &[]);
    assert!(a.status == 200 && a.body.contains(r#"type="password""#), "{}", a.body);

    let a = d.post("/login", &[], &form(&[("token", "wrong"), ("next", "/jobs")]));
    assert_eq!(a.status, 401);
    assert!(a.body.contains("That token is not valid."));
    assert!(a.cookies.is_empty(), "{:?}", a.cookies);

    let a = d.post("/login", &[], &form(&[("token", "s3cret-token"), ("next", "/jobs")]));
    assert_eq!((a.status, a.location.as_deref()), (303, Some("/jobs")));
    let set = &a.cookies[0];
    assert!(
        set.contains("HttpOnly") && set.contains("SameSite=Strict") && set.contains("Path=/"),
        "{set}"
    );
    assert!(!set.contains("s3cret-token"), "the cookie is not the token: {set}");
    let cookie = cookie_of(&a);
    let a = d.get("/", &[("Cookie", &cookie)]);
    assert!(a.status == 200 && a.body.contains("<h1>Overview</h1>"), "{}", a.body);
    // The bearer header works too; a tampered cookie does not.
    assert_eq!(d.get("/", &[("Authorization", "Bearer s3cret-token")]).status, 200);
    let tampered = format!("{}x", cookie);
    assert_eq!(d.get("/", &[("Cookie", &tampered)]).status, 303);
    // A login never sends the browser to another site.
    for next in [
        "//evil.example/",
        "https://evil.example/",
        "/\\evil.example",
        "/\t/evil.example",
        "/\n/evil.example",
        "/ /x",
    ] {
        let a = d.post("/login", &[], &form(&[("token", "s3cret-token"), ("next", next)]));
        assert_eq!(a.location.as_deref(), Some("/"), "next={next}");
    }
    // Logging out ends the browser's session.
    let csrf = csrf_of(&d.get("/", &[("Cookie", &cookie)]).body);
    let a = d.post("/logout", &[("Cookie", &cookie)], &form(&[("csrf", &csrf)]));
    assert_eq!(a.location.as_deref(), Some("/login"));
    assert!(a.cookies[0].contains("Max-Age=0"), "{:?}", a.cookies);
}

/// A post that must be refused: what it is, its headers, its body.
type Refused<'a> = (&'a str, Vec<(&'a str, &'a str)>, String);

#[test]
fn cross_site_and_tokenless_posts_are_refused_and_change_nothing() {
    let d = Dash::start(&[]);
    let id = d.relay.submit(NewJob::new("mail", "send", b"{}".to_vec())).unwrap();
    let (cookie, csrf) = d.session();
    let (other_cookie, _) = d.session();
    let host = d.base.trim_start_matches("http://").to_owned();
    let path = format!("/jobs/{}/cancel", id.0);
    let refused: [Refused; 6] = [
        // What a cross-site form post looks like: no cookie (SameSite=Strict), another Origin.
        (
            "cross-site form",
            vec![("Origin", "http://evil.example")],
            form(&[("csrf", &csrf)]),
        ),
        ("no CSRF token", vec![("Cookie", &cookie)], form(&[("back", "/")])),
        ("a wrong token", vec![("Cookie", &cookie)], form(&[("csrf", "AAAA")])),
        (
            "another session's token",
            vec![("Cookie", &other_cookie)],
            form(&[("csrf", &csrf)]),
        ),
        (
            "another Origin",
            vec![("Cookie", &cookie), ("Origin", "http://evil.example")],
            form(&[("csrf", &csrf)]),
        ),
        (
            "Sec-Fetch-Site: cross-site",
            vec![("Cookie", &cookie), ("Sec-Fetch-Site", "cross-site")],
            form(&[("csrf", &csrf)]),
        ),
    ];
    for (what, headers, body) in refused {
        let a = d.post(&path, &headers, &body);
        assert_eq!(a.status, 403, "{what}: {}", a.body);
        assert_eq!(
            d.relay.get(id).unwrap().state(),
            JobState::Ready,
            "{what} changed the job"
        );
    }
    // DNS rebinding: another site's name pointed at 127.0.0.1 reaches a
    // tokenless server, which answers only to loopback names.
    let port = host.rsplit(':').next().unwrap();
    for name in ["rebind.example", "127.0.0.1.rebind.example"] {
        let a = d.get("/", &[("Host", &format!("{name}:{port}"))]);
        assert_eq!(a.status, 403, "{name}: {}", a.body);
        assert!(a.cookies.is_empty(), "no session for {name}");
    }
    assert_eq!(d.get("/", &[("Host", &format!("localhost:{port}"))]).status, 200);
    let origin = format!("http://{host}");
    let a = d.post(
        &path,
        &[
            ("Cookie", &cookie),
            ("Origin", &origin),
            ("Sec-Fetch-Site", "same-origin"),
        ],
        &form(&[("csrf", &csrf), ("back", &format!("/jobs/{}", id.0))]),
    );
    assert_eq!(a.status, 303, "{}", a.body);
    assert_eq!(
        a.location.as_deref(),
        Some(format!("/jobs/{}?done=cancel&count=1&failed=0", id.0).as_str())
    );
    assert_eq!(d.relay.get(id).unwrap().state(), JobState::Cancelled);
}

#[test]
fn markup_in_every_field_renders_as_text() {
    let d = Dash::start(&[]);
    let x = "<script>alert('x')</script>";
    let id = d
        .relay
        .submit(
            NewJob::new("mail", x, serde_json::to_vec(&serde_json::json!({"html": x})).unwrap())
                .tags(["<b>tag</b>", "\"><img src=x onerror=alert(1)>"])
                .unique_key(x)
                .max_attempts(1),
        )
        .unwrap();
    let binary = d
        .relay
        .submit(NewJob::new("mail", "bin", format!("\u{1}{x}").into_bytes()))
        .unwrap();
    let l = d.relay.lease(LeaseRequest::new(["mail"]).max(2)).unwrap();
    d.relay.append_event(id, x, &serde_json::json!({"note": x})).unwrap();
    let held = l.iter().find(|j| j.id == id).unwrap();
    // Steps (issue 40) named and holding markup, as JSON and as bytes.
    let bin_lease = l.iter().find(|j| j.id == binary).unwrap();
    d.relay
        .record_step(
            binary,
            bin_lease.token,
            x,
            serde_json::to_vec(&serde_json::json!({"html": x})).unwrap(),
        )
        .unwrap();
    d.relay
        .record_step(binary, bin_lease.token, "raw", format!("\u{1}{x}").into_bytes())
        .unwrap();
    // A completion token's record: its secret completes it, the page hides it.
    let secret = "5e".repeat(32);
    let text = format!("{}.{secret}", "1d".repeat(16));
    d.relay
        .record_step(
            binary,
            bin_lease.token,
            "approval-token",
            serde_json::to_vec(&serde_json::json!({"token": text, "path": format!("/v1/tokens/{text}/complete")}))
                .unwrap(),
        )
        .unwrap();
    d.relay
        .nack(id, held.token, &format!("</pre>{x}\nsecond line"), None)
        .unwrap();
    assert!(
        d.relay.submit(NewJob::new(x, "k", Vec::new())).is_err(),
        "a queue name cannot hold markup at all"
    );
    let pages = [
        "/".to_owned(),
        "/jobs".to_owned(),
        format!("/jobs?kind={}&tag={}&error={}", enc(x), enc("<b>tag</b>"), enc(x)),
        format!("/jobs/{}", id.0),
        format!("/jobs/{}", binary.0),
        "/dead".to_owned(),
    ];
    for p in pages {
        let a = d.get(&p, &[]);
        assert_eq!(a.status, 200, "{p}: {}", a.body);
        let csp = a.csp.unwrap_or_default();
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe"),
            "{p}: {csp}"
        );
        assert_eq!(
            a.body.matches("<script").count(),
            1,
            "{p}: only the page's own script: {}",
            a.body
        );
        for raw in ["<b>tag</b>", "<img src=x", "</pre><script", "alert('x')</script>"] {
            assert!(!a.body.contains(raw), "{p} holds {raw:?} unescaped: {}", a.body);
        }
        for tag in real_tags(&a.body) {
            let handler = tag.split_whitespace().any(|w| w.starts_with("on") && w.contains('='));
            assert!(
                !tag.contains(" style=") && !handler,
                "{p}: inline style or handler in {tag}"
            );
        }
    }
    let page = d.get(&format!("/jobs/{}", id.0), &[]).body;
    assert!(
        page.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;")
            || page.contains("&lt;script&gt;alert('x')&lt;/script&gt;"),
        "{page}"
    );
    // What a WAITING job waits for (issue 40): an event, until a time.
    let waiting = d.relay.submit(NewJob::new("mail", "wait", b"{}".to_vec())).unwrap();
    let wl = d.relay.lease(LeaseRequest::new(["mail"])).unwrap().remove(0);
    assert_eq!(wl.id, waiting);
    let until = relay::Clock::now(&relay::SystemClock).plus(std::time::Duration::from_secs(3600));
    d.relay
        .complete_batch(vec![relay::Completion::wait(
            waiting,
            wl.token,
            "ship<b>",
            "shipped:42",
            until,
        )])
        .unwrap()
        .remove(0)
        .unwrap();
    let page = d.get(&format!("/jobs/{}", waiting.0), &[]).body;
    assert!(
        page.contains("<dt>Waiting for</dt>")
            && page.contains("<code>shipped:42</code>")
            && page.contains("ship&lt;b&gt;"),
        "{page}"
    );
    let bin = d.get(&format!("/jobs/{}", binary.0), &[]).body;
    assert!(
        bin.contains("bytes, neither JSON nor text") && bin.contains("01 3c 73 63"),
        "{bin}"
    );
    assert!(
        bin.contains("<h2>Steps</h2>") && bin.contains("<td class=\"kind\">raw</td>"),
        "{bin}"
    );
    assert!(!bin.contains(&secret) && bin.contains("(secret hidden)"), "{bin}");
}

/// The tags of a page as the browser parses them (text between `<` and
/// `>`; escaped text has neither).
fn real_tags(body: &str) -> Vec<&str> {
    body.split('<')
        .skip(1)
        .map(|t| t.split('>').next().unwrap_or(""))
        .collect()
}

#[test]
fn bulk_actions_by_selection_and_by_filter() {
    let d = Dash::start(&[]);
    let dead: Vec<JobId> = (0..3)
        .map(|_| {
            d.relay
                .submit(NewJob::new("q", "flaky", Vec::new()).max_attempts(1))
                .unwrap()
        })
        .collect();
    let other = d
        .relay
        .submit(NewJob::new("q", "steady", Vec::new()).max_attempts(1))
        .unwrap();
    for l in d.relay.lease(LeaseRequest::new(["q"]).max(10)).unwrap() {
        d.relay.nack(l.id, l.token, "smtp: refused", None).unwrap();
    }
    let ready = d.relay.submit(NewJob::new("q", "flaky", Vec::new())).unwrap();
    let (cookie, csrf) = d.session();
    let h = [("Cookie", cookie.as_str())];

    // Retry all DEAD "flaky" jobs, as the dead page's button does.
    let a = d.post(
        "/jobs/bulk",
        &h,
        &form(&[
            ("csrf", &csrf),
            ("action", "retry-all"),
            ("queue", "q"),
            ("state", "DEAD"),
            ("kind", "flaky"),
            ("back", "/dead?done=x&count=9"),
        ]),
    );
    assert_eq!(a.location.as_deref(), Some("/dead?done=retry&count=3&failed=0"));
    for id in &dead {
        assert_eq!(d.relay.get(*id).unwrap().state(), JobState::Ready);
    }
    assert_eq!(
        d.relay.get(other).unwrap().state(),
        JobState::Dead,
        "another kind is left alone"
    );

    // An action on all needs a filter.
    let a = d.post("/jobs/bulk", &h, &form(&[("csrf", &csrf), ("action", "cancel-all")]));
    assert_eq!(a.status, 400);
    assert_eq!(d.relay.get(ready).unwrap().state(), JobState::Ready);

    // Ticked jobs: one that can be cancelled, one that cannot (DEAD).
    let body = format!(
        "{}&ids={}&ids={}",
        form(&[("csrf", &csrf), ("action", "cancel"), ("back", "/jobs?queue=q")]),
        ready.0,
        other.0
    );
    let a = d.post("/jobs/bulk", &h, &body);
    assert_eq!(
        a.location.as_deref(),
        Some("/jobs?queue=q&done=cancel&count=1&failed=1")
    );
    assert_eq!(d.relay.get(ready).unwrap().state(), JobState::Cancelled);
    let page = d.get(a.location.as_deref().unwrap(), &h).body;
    assert!(page.contains("1 job cancelled. 1 could not be"), "{page}");

    // Pause from the overview.
    let a = d.post("/queues/q/pause", &h, &form(&[("csrf", &csrf), ("back", "/")]));
    assert_eq!(a.status, 303);
    assert!(d.relay.stats().unwrap().queues["q"].paused);
    let page = d.get("/", &h).body;
    assert!(page.contains("PAUSED") && page.contains("/queues/q/resume"), "{page}");

    // Pause a schedule from its page.
    d.relay
        .add_schedule(relay::NewSchedule::cron(
            "nightly.report",
            "0 3 * * *",
            NewJob::new("q", "k", Vec::new()).group("acme"),
        ))
        .unwrap();
    let page = d.get("/schedules", &h).body;
    assert!(
        page.contains("nightly.report") && page.contains("/schedules/nightly.report/pause"),
        "{page}"
    );
    assert!(page.contains("group acme"), "the schedule's group: {page}");
    let a = d.post("/schedules/nightly.report/pause", &h, &form(&[("csrf", &csrf)]));
    assert_eq!(a.location.as_deref(), Some("/schedules?done=pause&count=1&failed=0"));
    assert!(d.relay.schedules().unwrap()[0].paused);
    let page = d.get(a.location.as_deref().unwrap(), &h).body;
    assert!(
        page.contains("Paused.") && page.contains("/schedules/nightly.report/resume"),
        "{page}"
    );
}

#[test]
fn the_overview_shows_counts_and_the_hours_throughput() {
    let d = Dash::start(&[]);
    for _ in 0..5 {
        d.relay.submit(NewJob::new("mail", "send", Vec::new())).unwrap();
    }
    let l = d.relay.lease(LeaseRequest::new(["mail"]).max(2)).unwrap();
    d.relay.ack(l[0].id, l[0].token, None).unwrap();
    d.relay.nack_permanent(l[1].id, l[1].token, "bad").unwrap();
    let page = d.get("/", &[]).body;
    assert!(
        page.contains(r#"data-state="READY"><span class="n">3</span>"#),
        "{page}"
    );
    assert!(page.contains(r#"<td class="num" data-state="DEAD">1</td>"#), "{page}");
    assert!(
        page.contains(r#"data-series="submitted">submitted: <span class="n">5</span>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-series="succeeded">succeeded: <span class="n">1</span>"#),
        "{page}"
    );
    assert!(
        page.contains(r#"data-series="failed">failed: <span class="n">1</span>"#),
        "{page}"
    );
    // A queue's limits, its poison-pill count among them.
    let limits = relay::QueueLimits {
        max_leased: Some(4),
        max_leased_per_group: Some(2),
        poison_after: Some(5),
        ..Default::default()
    };
    d.relay.set_queue_limits("mail", limits).unwrap();
    let page = d.get("/", &[]).body;
    assert!(
        page.contains("≤ 4 leased ≤ 2 leased a group DEAD after 5 expiries"),
        "{page}"
    );
    // A job's group, on its page (escaped as any field).
    let grouped = d
        .relay
        .submit(NewJob::new("tenants", "k", Vec::new()).group("<i>acme</i>"))
        .unwrap();
    let page = d.get(&format!("/jobs/{}", grouped.0), &[]).body;
    assert!(
        page.contains("<dt>Group</dt><dd><code>&lt;i&gt;acme&lt;/i&gt;</code></dd>"),
        "{page}"
    );
    // A queue's page charts that queue's hour only.
    d.relay.submit(NewJob::new("other", "k", Vec::new())).unwrap();
    let page = d.get("/jobs?queue=mail", &[]).body;
    assert!(page.contains("This queue, last hour"), "{page}");
    assert!(
        page.contains(r#"data-series="submitted">submitted: <span class="n">5</span>"#),
        "{page}"
    );
    let page = d.get("/jobs?queue=other", &[]).body;
    assert!(
        page.contains(r#"data-series="submitted">submitted: <span class="n">1</span>"#),
        "{page}"
    );
    assert!(
        !d.get("/jobs?kind=k", &[]).body.contains("This queue"),
        "no queue, no chart"
    );
    // Polling the pages reads only: the writer commits nothing for them.
    let before = (d.relay.metrics().commits, d.relay.metrics().operations);
    for p in [
        "/",
        "/jobs",
        "/jobs?state=DEAD",
        "/dead",
        "/schedules",
        &format!("/jobs/{}", l[0].id.0),
    ] {
        for _ in 0..5 {
            assert_eq!(d.get(p, &[]).status, 200, "{p}");
        }
    }
    assert_eq!((d.relay.metrics().commits, d.relay.metrics().operations), before);
    // Assets are served from the binary, cacheable, with their types.
    let a = d.get("/assets/dashboard.js", &[]);
    assert!(a.status == 200 && a.body.contains("DOMParser"));
    assert_eq!(d.get("/assets/nope.js", &[]).status, 404);
}

/// A dashboard server with `tokens` on the database file `db`.
fn dash_on(db: &std::path::Path, tokens: &[&str], secure: bool) -> (common::ServerThread, String) {
    let relay = Relay::open(db).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
    config.secure_cookies = secure;
    let server = common::ServerThread::start(relay, config);
    let base = format!("http://{}", server.addr);
    (server, base)
}

fn get_at(base: &str, path: &str, cookie: &str) -> Answer {
    answer(
        agent()
            .get(&format!("{base}{path}"))
            .header("Cookie", cookie)
            .call()
            .unwrap(),
    )
}

fn login_at(base: &str, token: &str) -> Answer {
    answer(
        agent()
            .post(&format!("{base}/login"))
            .content_type("application/x-www-form-urlencoded")
            .send(form(&[("token", token), ("next", "/")]))
            .unwrap(),
    )
}

/// Regression (issue 24, item 3): after logout the same cookie still opened
/// the overview and changed state. Logging out ends the session on the
/// server side: on every server of the store, and after a restart.
#[test]
fn a_logged_out_session_is_over_on_every_server_of_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shared.db");
    let (_a, a) = dash_on(&db, &["team-token"], false);
    let (_b, b) = dash_on(&db, &["team-token"], false);
    let login = login_at(&a, "team-token");
    assert!(
        !login.cookies[0].contains("Secure"),
        "no Secure unless asked: {:?}",
        login.cookies
    );
    let cookie = cookie_of(&login);
    let kept = cookie_of(&login_at(&a, "team-token"));
    for base in [&a, &b] {
        assert_eq!(get_at(base, "/", &cookie).status, 200, "the session opens {base}");
    }
    let page = get_at(&a, "/", &cookie);
    let csrf = csrf_of(&page.body);
    let out = answer(
        agent()
            .post(&format!("{a}/logout"))
            .content_type("application/x-www-form-urlencoded")
            .header("Cookie", &cookie)
            .send(form(&[("csrf", &csrf)]))
            .unwrap(),
    );
    assert_eq!(out.location.as_deref(), Some("/login"));
    // The cookie, replayed, opens nothing and changes nothing, here or on
    // the other server.
    for base in [&a, &b] {
        let again = get_at(base, "/", &cookie);
        assert_eq!(
            (again.status, again.location.as_deref()),
            (303, Some("/login?next=%2F")),
            "{base}: {}",
            again.body
        );
        let pause = answer(
            agent()
                .post(&format!("{base}/queues/emails/pause"))
                .content_type("application/x-www-form-urlencoded")
                .header("Cookie", &cookie)
                .send(form(&[("csrf", &csrf)]))
                .unwrap(),
        );
        assert_eq!(pause.status, 403, "{base}: {}", pause.body);
    }
    let relay = Relay::open(&db).unwrap();
    assert!(relay.stats().unwrap().queues.get("emails").is_none_or(|q| !q.paused));
    // Another session of the same token goes on.
    assert_eq!(get_at(&b, "/", &kept).status, 200);
    // After a restart, still over.
    drop((_a, _b));
    let (_c, c) = dash_on(&db, &["team-token"], true);
    assert_eq!(get_at(&c, "/", &cookie).status, 303);
    assert_eq!(get_at(&c, "/", &kept).status, 200);
    // Behind TLS: the cookie is Secure (set and cleared).
    let login = login_at(&c, "team-token");
    assert!(login.cookies[0].contains("; Secure"), "{:?}", login.cookies);
}

/// Issue 39, item 4: the Workers page listed every worker (100,000: 34 MB,
/// reloaded every 2 s) and a job's page every event (50,000: 20.6 MB).
/// Both now show a page (200 workers by id, 200 events) with a link to
/// the next. Seen failing before: 250 rows and no link.
#[test]
fn the_workers_and_a_jobs_events_come_a_page_at_a_time() {
    let d = Dash::start(&["team-token"]);
    let cookie = [("Authorization", "Bearer team-token")];
    for i in 0..250 {
        let beat = relay::WorkerBeat {
            id: format!("w{i:03}"),
            name: "w".into(),
            host: "h".into(),
            pid: 1,
            queues: vec!["q".into()],
            concurrency: 1,
            version: "t".into(),
            started_at: relay::Timestamp::from_millis(0),
            beat_every: std::time::Duration::from_secs(5),
            running: Vec::new(),
        };
        d.relay.worker_beat(&beat).unwrap();
    }
    let page = d.get("/workers", &cookie);
    assert_eq!(page.status, 200, "{}", page.body);
    assert_eq!(
        page.body.matches("<small>w").count(),
        200,
        "200 workers on the first page"
    );
    assert!(
        page.body.contains("href=\"/workers?after=w199\""),
        "a link to the next page"
    );
    let next = d.get("/workers?after=w199", &cookie);
    assert_eq!(next.body.matches("<small>w").count(), 50);
    assert!(!next.body.contains("Next workers"));

    let id = d.relay.submit(relay::NewJob::new("q", "k", Vec::new())).unwrap();
    for i in 0..250 {
        d.relay
            .append_event(id, "note", &serde_json::json!({ "i": i }))
            .unwrap();
    }
    let job = d.get(&format!("/jobs/{}", id.0), &cookie);
    assert_eq!(job.status, 200);
    assert_eq!(
        job.body.matches("<td class=\"kind\">").count(),
        200,
        "200 events on the job's page"
    );
    let link = format!("href=\"/jobs/{}?events_after=200\"", id.0);
    assert!(job.body.contains(&link), "a link to the next events");
    let rest = d.get(&format!("/jobs/{}?events_after=200", id.0), &cookie);
    assert_eq!(rest.body.matches("<td class=\"kind\">").count(), 51);
}

/// Issue 40, item 6: the Events page lists the keys WAITING jobs wait for
/// (with how many and the soonest timeout; a cancelled job's wait, a
/// join and an emitted key left out), the latest events kept (JSON as
/// written, bytes in base64, a long payload cut) and the completion tokens
/// not completed yet (a completed one and an expired one left out, no
/// secret on the page).
#[test]
fn the_events_page_shows_waits_recent_events_and_open_tokens() {
    let d = Dash::start(&[]);
    let r = &d.relay;
    let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_secs(3600));
    // A job of queue `q`, leased.
    let leased = |q: &str| {
        r.submit(NewJob::new(q, "k", Vec::new())).unwrap();
        r.lease(LeaseRequest::new([q])).unwrap().remove(0)
    };
    let mut waiting = Vec::new();
    for _ in 0..3 {
        let j = leased("shipping");
        r.wait(j.id, j.token, "ship", "shipped:7", until).unwrap();
        waiting.push(j.id);
    }
    let cancelled = leased("other");
    r.wait(cancelled.id, cancelled.token, "ship", "gone:1", until).unwrap();
    r.cancel(cancelled.id).unwrap();
    let emitted = leased("other");
    r.wait(emitted.id, emitted.token, "ship", "woken:1", until).unwrap();
    assert_eq!(r.emit("woken:1", br#"{"by": "ada"}"#.to_vec()).unwrap().woken, 1);
    r.emit("bytes:1", vec![0xff, 0x00, 0x01]).unwrap();
    r.emit("long:1", format!("\"{}\"", "x".repeat(1000)).into_bytes())
        .unwrap();
    // Tokens: one open and waited for, one completed, one expired.
    let holder = leased("approvals");
    let open = r
        .create_token(holder.id, holder.token, Duration::from_secs(600))
        .unwrap();
    let j = leased("approvals");
    let done = r.create_token(j.id, j.token, Duration::from_secs(600)).unwrap();
    r.complete_token(&format!("{}.{}", done.id, done.secret), Vec::new())
        .unwrap();
    let j = leased("approvals");
    let expired = r.create_token(j.id, j.token, Duration::from_millis(1)).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    r.wait(
        holder.id,
        holder.token,
        "approval",
        &format!("token:{}", open.id),
        open.expires_at,
    )
    .unwrap();

    let a = d.get("/events", &[]);
    assert_eq!(a.status, 200, "{}", a.body);
    let page = a.body;
    let row = |attr: &str, key: &str| -> String {
        let at = page
            .find(&format!(r#"{attr}="{key}""#))
            .unwrap_or_else(|| panic!("no row {key}: {page}"));
        page[at..at + page[at..].find("</tr>").unwrap()].to_owned()
    };
    let shipped = row("data-key", "shipped:7");
    assert!(shipped.contains(r#"<td class="num">3</td>"#), "{shipped}");
    assert!(
        shipped.contains(&format!(r#"href="/jobs/{}""#, waiting[0].0)),
        "{shipped}"
    );
    let token_wait = row("data-key", &format!("token:{}", open.id));
    assert!(token_wait.contains(r#"<td class="num">1</td>"#), "{token_wait}");
    for gone in ["gone:1", "#join"] {
        assert!(!page.contains(&format!(r#"data-key="{gone}"#)), "{gone} listed: {page}");
    }
    assert!(row("data-key", "woken:1").contains(r#"{"by": "ada"}"#.replace('"', "&quot;").as_str()));
    let bytes = row("data-key", "bytes:1");
    assert!(bytes.contains("base64 ") && bytes.contains("/wAB"), "{bytes}");
    let long = row("data-key", "long:1");
    assert!(long.contains('…') && long.matches('x').count() < 400, "{long}");
    let tok = row("data-token", &open.id);
    assert!(tok.contains(&format!(r#"href="/jobs/{}""#, holder.id.0)), "{tok}");
    for left_out in [&done.id, &expired.id] {
        assert!(
            !page.contains(&format!(r#"data-token="{left_out}""#)),
            "token {left_out} listed: {page}"
        );
    }
    for secret in [&open.secret, &done.secret, &expired.secret] {
        assert!(!page.contains(secret.as_str()), "a token's secret on the page");
    }
    assert!(
        page.contains(r#"<a href="/events" aria-current="page">Events</a>"#),
        "in the menu"
    );
}

/// Issue 40, item 6: a DEAD job with recorded steps offers "Retry from
/// the start" beside "Retry" on its page; the first forgets its steps
/// (`Relay::retry_from_start`), the second keeps them.
#[test]
fn a_dead_jobs_page_retries_it_from_the_start_or_after_its_steps() {
    let d = Dash::start(&[]);
    let dead_with_a_step = || {
        let id = d
            .relay
            .submit(NewJob::new("flows", "k", Vec::new()).max_attempts(1))
            .unwrap();
        let l = d.relay.lease(LeaseRequest::new(["flows"])).unwrap().remove(0);
        d.relay.record_step(id, l.token, "charge", b"1".to_vec()).unwrap();
        d.relay.nack(id, l.token, "boom", None).unwrap();
        assert_eq!(d.relay.get(id).unwrap().state(), JobState::Dead);
        id
    };
    let (kept, reset) = (dead_with_a_step(), dead_with_a_step());
    let (cookie, csrf) = d.session();
    let h = [("Cookie", cookie.as_str())];
    let page = d.get(&format!("/jobs/{}", reset.0), &h).body;
    assert!(page.contains("Retry from the start"), "{page}");
    for (id, action) in [(kept, "retry"), (reset, "retry-from-start")] {
        let back = format!("/jobs/{}", id.0);
        let a = d.post(
            &format!("/jobs/{}/{action}", id.0),
            &h,
            &form(&[("csrf", &csrf), ("back", &back)]),
        );
        assert_eq!(a.status, 303, "{}", a.body);
    }
    let steps = |id| d.relay.get(id).unwrap().steps.len();
    assert_eq!((d.relay.get(kept).unwrap().state(), steps(kept)), (JobState::Ready, 1));
    assert_eq!(
        (d.relay.get(reset).unwrap().state(), steps(reset)),
        (JobState::Ready, 0)
    );
    let page = d
        .get(&format!("/jobs/{}?done=retry-from-start&count=1", reset.0), &h)
        .body;
    assert!(page.contains("1 job retried from the start."), "{page}");
    // A job without steps has nothing to forget: no second button.
    let plain = d.relay.submit(NewJob::new("plain", "k", Vec::new())).unwrap();
    d.relay.cancel(plain).unwrap();
    assert!(!d
        .get(&format!("/jobs/{}", plain.0), &h)
        .body
        .contains("Retry from the start"));
}

/// Issue 42, the job page during an incident: a text result (`echo sent
/// ...`) is text, bytes are hex with an ASCII column; a job that
/// SUCCEEDED after a failed attempt shows that error as history (not a red
/// "Last error") and its progress as done, not frozen at its last report;
/// times say their zone. Seen failing before: a hex dump of the text, a
/// red "Last error", progress 50%.
#[test]
fn the_job_page_shows_text_as_text_and_a_succeeded_job_as_done() {
    let d = Dash::start(&[]);
    let r = &d.relay;
    let id = r
        .submit(NewJob::new("mail", "send", Vec::new()).max_attempts(3))
        .unwrap();
    let l = r.lease(LeaseRequest::new(["mail"])).unwrap().remove(0);
    r.progress(id, l.token, 0.5, Some("half way")).unwrap();
    r.nack(id, l.token, "smtp timeout", Some(Duration::ZERO)).unwrap();
    let l = r.lease(LeaseRequest::new(["mail"])).unwrap().remove(0);
    r.progress(id, l.token, 0.5, Some("half way")).unwrap();
    r.ack(id, l.token, Some(b"sent to ada\n".to_vec())).unwrap();
    let page = d.get(&format!("/jobs/{}", id.0), &[]).body;
    assert!(page.contains("<pre class=\"text\">sent to ada\n</pre>"), "{page}");
    assert!(!page.contains("Last error") && !page.contains("error-text"), "{page}");
    assert!(page.contains("Error of an earlier attempt"), "{page}");
    assert!(
        page.contains(r#"<progress value="1" max="1">"#) && page.contains("done; last reported 50%"),
        "{page}"
    );
    assert!(page.contains(" UTC</time>"), "{page}");

    let bytes = r
        .submit(NewJob::new("mail", "send", vec![0xff, b'h', b'i', 0]))
        .unwrap();
    let page = d.get(&format!("/jobs/{}", bytes.0), &[]).body;
    assert!(page.contains("4 bytes, neither JSON nor text:"), "{page}");
    assert!(page.contains("00000000  ff 68 69 00 "), "{page}");
    assert!(page.contains("|.hi.|"), "{page}");
}

/// Issue 42: a stopped worker's "Up" is how long it ran, from its start
/// to its stop, not a time that keeps growing. Its stop is written at the
/// store's clock, set 10 minutes back here, an hour after its start: a
/// page computing "Up" from now would say 1h 10m.
#[test]
fn a_stopped_workers_up_time_stops_growing() {
    let dir = tempfile::tempdir().unwrap();
    let system = relay::Clock::now(&relay::SystemClock).as_millis();
    let clock = std::sync::Arc::new(relay::ManualClock::new(relay::Timestamp::from_millis(system - 600_000)));
    let options = relay::Options {
        clock,
        ..relay::Options::default()
    };
    let r = Relay::open_with(dir.path().join("w.db"), options).unwrap();
    let server = common::ServerThread::start(r.clone(), ServerConfig::new("127.0.0.1:0".parse().unwrap()));
    let beat = relay::WorkerBeat {
        id: "w1".into(),
        name: "render".into(),
        host: "h".into(),
        pid: 1,
        queues: vec!["q".into()],
        concurrency: 1,
        version: "t".into(),
        started_at: relay::Timestamp::from_millis(system - 4_200_000),
        beat_every: Duration::from_secs(5),
        running: Vec::new(),
    };
    r.worker_beat(&beat).unwrap();
    r.worker_stopped(&beat).unwrap();
    let page = answer(agent().get(&format!("http://{}/workers", server.addr)).call().unwrap()).body;
    assert!(page.contains(r#"data-state="stopped""#), "{page}");
    assert!(page.contains(r#"<td class="up">1h 0m</td>"#), "{page}");
}
