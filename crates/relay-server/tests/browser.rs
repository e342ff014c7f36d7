//! The dashboard in a real browser: Debian's Chromium, headless, driven
//! over WebDriver (chromedriver, fantoccini) against a real server on a
//! loopback port. Logs in, checks the overview against the store, reads a
//! DEAD job's error and timeline, retries every DEAD job of one kind,
//! cancels a job from its page, searches by tag, pauses a queue, sees a
//! live update without reloading, and checks that markup in a job runs
//! nothing. Screenshots go to `target/dashboard-screenshots/`.
//!
//! Needs `chromium` and `chromedriver` (Debian's `chromium-driver`):
//! `scripts/test-deps` installs them. Without them this test fails, and
//! says so: it never passes by skipping.

mod common;

use fantoccini::{Client, ClientBuilder, Locator};
use relay::{JobId, JobState, LeaseRequest, NewJob, Relay};
use relay_server::ServerConfig;
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const TOKEN: &str = "browser-test-token";

/// chromedriver on a free loopback port, killed when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Driver {
    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // A process group of its own: dropping the driver ends the browser
        // it started too, even when the test panicked before closing it.
        let child = Command::new("chromedriver")
            .process_group(0)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| {
                panic!("cannot start chromedriver ({e}): install chromium and chromium-driver with scripts/test-deps")
            });
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                Instant::now() < deadline,
                "chromedriver did not listen on port {port} within 30 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The whole group: chromedriver and every Chromium process under it.
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.child.id())])
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn browser(driver: &Driver) -> Client {
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".into(),
        serde_json::json!({
            "binary": "/usr/bin/chromium",
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1360,1000", "--hide-scrollbars", "--force-device-scale-factor=1"],
        }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    ClientBuilder::new(connector)
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a Chromium session over chromedriver")
}

fn shots() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target/dashboard-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn shot(c: &Client, name: &str) {
    let png = c.screenshot().await.unwrap();
    std::fs::write(shots().join(format!("{name}.png")), png).unwrap();
}

/// Whether a WebDriver error is a stale element: the live update replaced
/// the part of the page it was in between finding it and using it.
fn stale(e: &fantoccini::error::CmdError) -> bool {
    e.is_stale_element_reference()
}

/// Clicks the element `css` finds, finding it again (a few times) when the
/// live update replaced it first.
async fn click(c: &Client, css: &str) {
    for _ in 0..10 {
        let e = c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
        match e.click().await {
            Ok(()) => return,
            Err(e) if stale(&e) => continue,
            Err(e) => panic!("click {css}: {e}"),
        }
    }
    panic!("click {css}: the element went stale ten times");
}

async fn wait_for(c: &Client, css: &str) {
    c.wait()
        .for_element(Locator::Css(css))
        .await
        .unwrap_or_else(|e| panic!("waiting for {css}: {e}"));
}

/// The text of the element `css` finds (found again when the live update
/// replaced it first).
async fn text(c: &Client, css: &str) -> String {
    for _ in 0..10 {
        let e = c.find(Locator::Css(css)).await.unwrap_or_else(|e| panic!("{css}: {e}"));
        match e.text().await {
            Ok(t) => return t,
            Err(e) if stale(&e) => continue,
            Err(e) => panic!("text of {css}: {e}"),
        }
    }
    panic!("text of {css}: the element went stale ten times");
}

/// Waits (bounded) until `f` holds.
async fn until(what: &str, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within 30 s");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn seed(relay: &Relay) -> (Vec<JobId>, JobId, Vec<JobId>, JobId) {
    for i in 0..6 {
        let payload = serde_json::json!({"to": format!("user{i}@example.com"), "template": "welcome"});
        relay
            .submit(NewJob::new("mail", "send", payload.to_string().into_bytes()).max_attempts(1))
            .unwrap();
    }
    for _ in 0..3 {
        relay
            .submit(NewJob::new("mail", "bounce", b"{}".to_vec()).max_attempts(1))
            .unwrap();
    }
    // Fail every "send" and "bounce" job for good: DEAD.
    let mut dead = Vec::new();
    for l in relay.lease(LeaseRequest::new(["mail"]).max(100)).unwrap() {
        let error = if l.kind == "send" {
            "smtp: connection refused by mx.example.com\n  at send (mailer.rs:42)"
        } else {
            "mailbox full"
        };
        relay.nack(l.id, l.token, error, None).unwrap();
        if l.kind == "send" {
            dead.push(l.id);
        }
    }
    let mut tagged = Vec::new();
    for i in 0..4 {
        let job = NewJob::new("reports", "render", format!("{{\"report\":{i}}}").into_bytes());
        let job = if i % 2 == 0 {
            job.tags(["vip", "eu"])
        } else {
            job.tags(["eu"])
        };
        let id = relay.submit(job).unwrap();
        if i % 2 == 0 {
            tagged.push(id);
        }
    }
    let to_cancel = relay
        .submit(NewJob::new("reports", "render", b"{\"report\":99}".to_vec()))
        .unwrap();
    // Waiting for their time: two SCHEDULED (a first run in an hour), one
    // RETRYING (backing off for an hour after a failure).
    for i in 0..2 {
        let job = NewJob::new("digest", "weekly", format!("{{\"week\":{i}}}").into_bytes());
        relay.submit(job.delay(Duration::from_secs(3600))).unwrap();
    }
    relay
        .submit(NewJob::new("digest", "flaky", b"{}".to_vec()).max_attempts(3))
        .unwrap();
    let l = relay.lease(LeaseRequest::new(["digest"])).unwrap().remove(0);
    relay
        .nack(l.id, l.token, "upstream 503", Some(Duration::from_secs(3600)))
        .unwrap();
    let xss = relay
        .submit(NewJob::new(
            "mail",
            "<img src=x onerror=\"document.title='pwned'\">",
            b"\"<script>document.title='pwned'</script>\"".to_vec(),
        ))
        .unwrap();
    (dead, to_cancel, tagged, xss)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_dashboard_in_chromium() {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open(dir.path().join("browser.db")).unwrap();
    let (dead, to_cancel, tagged, xss) = seed(&relay);
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tokens = vec![TOKEN.into()];
    let server = common::ServerThread::start(relay.clone(), config);
    let base = format!("http://{}", server.addr);
    let driver = Driver::start();
    let c = browser(&driver).await;

    // Log in.
    c.goto(&format!("{base}/")).await.unwrap();
    assert!(c.current_url().await.unwrap().path().starts_with("/login"));
    shot(&c, "login").await;
    c.find(Locator::Css("input[name=token]"))
        .await
        .unwrap()
        .send_keys(TOKEN)
        .await
        .unwrap();
    click(&c, "form.login button").await;
    wait_for(&c, "#live").await;
    assert_eq!(c.current_url().await.unwrap().path(), "/");

    // The overview's counts are the store's.
    let stats = relay.stats().unwrap();
    for st in JobState::ALL {
        let want: u64 = stats.queues.values().map(|q| q.counts[&st]).sum();
        let got = text(&c, &format!(".totals [data-state={}] .n", st.as_str())).await;
        assert_eq!(got, want.to_string(), "{} total", st.as_str());
        for (name, q) in &stats.queues {
            let cell = text(&c, &format!("tr[data-queue='{name}'] td[data-state={}]", st.as_str())).await;
            assert_eq!(cell, q.counts[&st].to_string(), "{name} {}", st.as_str());
        }
    }
    assert_eq!(text(&c, "[data-series=submitted] .n").await, "18");
    let scheduled = text(&c, ".totals [data-state=SCHEDULED] .n").await;
    let retrying = text(&c, ".totals [data-state=RETRYING] .n").await;
    assert_eq!(
        (scheduled.as_str(), retrying.as_str()),
        ("2", "1"),
        "told apart from READY"
    );
    shot(&c, "overview").await;

    // Each with when it runs, relative and in UTC.
    c.goto(&format!("{base}/jobs?state=SCHEDULED")).await.unwrap();
    wait_for(&c, "table.jobs td.runs time").await;
    let runs = c.find_all(Locator::Css("table.jobs tbody td.runs")).await.unwrap();
    assert_eq!(runs.len(), 2);
    for cell in runs {
        let t = cell.text().await.unwrap();
        assert!(
            t.starts_with("in 5") && t.contains(" min (") && t.ends_with(" UTC)"),
            "{t}"
        );
    }
    shot(&c, "scheduled").await;
    c.goto(&format!("{base}/")).await.unwrap();
    wait_for(&c, "#live").await;

    // Live: a job submitted elsewhere shows up without a reload.
    let before = text(&c, ".totals [data-state=READY] .n").await;
    relay.submit(NewJob::new("reports", "render", b"{}".to_vec())).unwrap();
    let want = (before.parse::<u64>().unwrap() + 1).to_string();
    let deadline = Instant::now() + Duration::from_secs(60);
    while text(&c, ".totals [data-state=READY] .n").await != want {
        assert!(Instant::now() < deadline, "the overview did not update by itself");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A DEAD job: its error and its timeline.
    c.goto(&format!("{base}/dead")).await.unwrap();
    shot(&c, "dead").await;
    click(&c, "tr[data-kind=send] td:nth-child(5) a").await;
    wait_for(&c, "pre.error-text").await;
    let newest = dead.iter().max().unwrap();
    assert_eq!(c.current_url().await.unwrap().path(), format!("/jobs/{}", newest.0));
    assert_eq!(
        text(&c, "pre.error-text").await,
        "smtp: connection refused by mx.example.com\n  at send (mailer.rs:42)"
    );
    let timeline = text(&c, "table.events").await;
    for kind in ["submitted", "leased", "failed"] {
        assert!(timeline.contains(kind), "{timeline}");
    }
    shot(&c, "job").await;

    // Retry every DEAD "send" job from the dead page.
    c.goto(&format!("{base}/dead")).await.unwrap();
    click(&c, "tr[data-kind=send] button").await;
    wait_for(&c, "p.notice").await;
    assert_eq!(text(&c, "p.notice").await, "6 jobs retried.");
    for id in &dead {
        assert_eq!(relay.get(*id).unwrap().state(), JobState::Ready, "job {id}");
    }
    let bounce_dead = relay.stats().unwrap().queues["mail"].counts[&JobState::Dead];
    assert_eq!(bounce_dead, 3, "the other kind stays DEAD");

    // Cancel a job from its page.
    c.goto(&format!("{base}/jobs/{}", to_cancel.0)).await.unwrap();
    click(&c, "form[action$='/cancel'] button").await;
    wait_for(&c, "p.notice").await;
    assert_eq!(relay.get(to_cancel).unwrap().state(), JobState::Cancelled);
    assert_eq!(text(&c, "h1 .badge").await, "CANCELLED");

    // Search by tag.
    c.goto(&format!("{base}/jobs")).await.unwrap();
    c.find(Locator::Css("form.search input[name=tag]"))
        .await
        .unwrap()
        .send_keys("vip")
        .await
        .unwrap();
    click(&c, "form.search button").await;
    // The search's own page (the unfiltered one had a table.jobs too),
    // read again when a live update replaced its rows meanwhile.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !c.current_url().await.unwrap().as_str().contains("tag=vip") {
        assert!(std::time::Instant::now() < deadline, "the search never loaded");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    wait_for(&c, "table.jobs").await;
    let mut found = Vec::new();
    'read: for _ in 0..10 {
        found.clear();
        for r in c.find_all(Locator::Css("table.jobs tbody tr")).await.unwrap() {
            match r.attr("data-job").await {
                Ok(id) => found.push(id.unwrap().parse::<i64>().unwrap()),
                Err(e) if stale(&e) => continue 'read,
                Err(e) => panic!("data-job: {e}"),
            }
        }
        break;
    }
    let mut want: Vec<i64> = tagged.iter().map(|id| id.0).collect();
    want.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(found, want, "newest first, only the tagged jobs");
    shot(&c, "search").await;

    // Pause a queue from the overview.
    c.goto(&format!("{base}/")).await.unwrap();
    click(&c, "tr[data-queue=reports] form[action$='/pause'] button").await;
    wait_for(&c, "p.notice").await;
    assert!(relay.stats().unwrap().queues["reports"].paused);
    assert_eq!(text(&c, "tr[data-queue=reports] .status").await, "PAUSED");
    let relay2 = relay.clone();
    until("the paused queue leases nothing", move || {
        relay2.lease(LeaseRequest::new(["reports"])).unwrap().is_empty()
    })
    .await;

    // A running job's progress: on its page and in the jobs list.
    let running = relay.submit(NewJob::new("imports", "rows", b"{}".to_vec())).unwrap();
    let l = relay.lease(LeaseRequest::new(["imports"])).unwrap().remove(0);
    assert_eq!(l.id, running);
    relay.progress(running, l.token, 0.4, Some("row 400 of 1000")).unwrap();
    c.goto(&format!("{base}/jobs/{}", running.0)).await.unwrap();
    wait_for(&c, "dd.progress").await;
    let shown = text(&c, "dd.progress").await;
    assert!(
        shown.contains("40%") && shown.contains("row 400 of 1000") && shown.contains("attempt 1"),
        "{shown}"
    );
    shot(&c, "progress").await;
    c.goto(&format!("{base}/jobs?queue=imports")).await.unwrap();
    wait_for(&c, "table.jobs").await;
    assert_eq!(
        text(&c, &format!("tr[data-job='{}'] td.progress", running.0)).await,
        "40%"
    );

    // The workers page: a running worker (the Rust runtime, two jobs
    // running) and one whose heartbeats stopped, its lease orphaned.
    let (release, hold) = std::sync::mpsc::channel::<()>();
    let hold = std::sync::Mutex::new(hold);
    for _ in 0..2 {
        relay.submit(NewJob::new("renders", "frame", b"{}".to_vec())).unwrap();
    }
    let worker = relay::worker::Worker::new(relay.clone(), ["renders"])
        .name("render-farm-1")
        .concurrency(4)
        .handle_signals(false)
        .beat_every(Duration::from_millis(200))
        .handler("frame", move |_| {
            let _ = hold.lock().unwrap().recv_timeout(Duration::from_secs(60));
            Ok(None)
        });
    let stop = worker.shutdown_handle();
    let running = std::thread::spawn(move || worker.run());
    let crashed = relay.submit(NewJob::new("imports", "rows", b"{}".to_vec())).unwrap();
    let lease = relay
        .lease(
            LeaseRequest::new(["imports"])
                .worker("importer-7-0badc0de") // runtimes lease under their worker id
                .lease_for(Duration::from_secs(600)),
        )
        .unwrap()
        .remove(0);
    assert_eq!(lease.id, crashed);
    relay
        .worker_beat(&relay::WorkerBeat {
            id: "importer-7-0badc0de".into(),
            name: "importer-7".into(),
            host: "batch-2".into(),
            pid: 4242,
            queues: vec!["imports".into()],
            concurrency: 1,
            version: "relay-python 0.1.0".into(),
            started_at: relay::Timestamp::from_millis(relay::Clock::now(&relay::SystemClock).as_millis() - 3_600_000),
            beat_every: Duration::from_millis(100),
            running: vec![relay::Running {
                job: crashed,
                token: lease.token,
                since: relay::Clock::now(&relay::SystemClock),
            }],
        })
        .unwrap();
    c.goto(&format!("{base}/workers")).await.unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        // Live: the page updates itself as heartbeats come and stop.
        let cells = c.find_all(Locator::Css("tr[data-state=alive] td.slots")).await.unwrap();
        let alive = match cells.first() {
            Some(cell) => cell.text().await.unwrap_or_default(),
            None => String::new(),
        };
        let gone = c
            .find_all(Locator::Css("tr[data-state=gone] .orphaned"))
            .await
            .unwrap()
            .len();
        if alive.starts_with("2 / 4") && gone == 1 {
            break;
        }
        if Instant::now() >= deadline {
            let source = c.source().await.unwrap_or_default();
            panic!("the workers page never showed them: {alive:?}, {gone} orphaned: {source}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(text(&c, "tr[data-state=alive]").await.contains("render-farm-1"));
    let orphan = text(&c, "tr[data-state=gone] .orphaned").await;
    assert!(orphan.contains(&format!("job {}", crashed.0)), "{orphan}");
    assert_eq!(
        c.find_all(Locator::Css("tr[data-state=alive] td.running div"))
            .await
            .unwrap()
            .len(),
        2,
        "the worker runs two jobs"
    );
    shot(&c, "workers").await;
    stop.graceful();
    drop(release);
    running.join().unwrap().unwrap();
    c.goto(&format!("{base}/workers")).await.unwrap();
    wait_for(&c, "tr[data-state=stopped]").await;

    // The Events page (issue 40): a job waiting for an event, then the
    // event once emitted (the page is reached from the menu).
    let until = relay::Clock::now(&relay::SystemClock).plus(Duration::from_secs(3600));
    let waiter = relay.submit(NewJob::new("shipping", "ship", Vec::new())).unwrap();
    let l = relay.lease(LeaseRequest::new(["shipping"])).unwrap().remove(0);
    relay.wait(waiter, l.token, "ship", "shipped:9", until).unwrap();
    c.goto(&format!("{base}/")).await.unwrap();
    click(&c, "nav a[href='/events']").await;
    wait_for(&c, "table.awaited tr[data-key='shipped:9']").await;
    assert_eq!(text(&c, "table.awaited tr[data-key='shipped:9'] td.num").await, "1");
    relay.emit("shipped:9", br#"{"carrier":"ups"}"#.to_vec()).unwrap();
    c.goto(&format!("{base}/events")).await.unwrap();
    wait_for(&c, "table.recent tr[data-key='shipped:9']").await;
    assert_eq!(
        text(&c, "table.recent tr[data-key='shipped:9'] td.payload").await,
        r#"{"carrier":"ups"}"#
    );
    assert_eq!(relay.get(waiter).unwrap().state(), JobState::Ready);
    shot(&c, "events").await;

    // Markup in a job is text: nothing runs, nothing is injected.
    c.goto(&format!("{base}/jobs/{}", xss.0)).await.unwrap();
    wait_for(&c, "dd.kind").await;
    assert_eq!(
        text(&c, "dd.kind").await,
        "<img src=x onerror=\"document.title='pwned'\">"
    );
    assert_eq!(
        text(&c, "pre.json").await,
        "\"<script>document.title='pwned'</script>\""
    );
    assert_eq!(c.title().await.unwrap(), format!("Job {} · Relay", xss.0));
    let injected = c
        .execute(
            "return document.querySelectorAll('main img, main script').length",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(injected, serde_json::json!(0));

    c.close().await.unwrap();
    drop(server);
}
