//! Amplification by queue count (issue 24, item 9), against a real
//! `relay serve`: with 100,000 queues, one `/v1/stats` answered 18 MB,
//! `/metrics` 31 MB and the dashboard's overview 59 MB, and four
//! concurrent `/v1/stats` took the server to 673 MiB. Now every answer is a
//! page (the queue lists) or a bounded summary (`/metrics`: the busiest
//! queues and the rest summed), and the server's memory stays flat while
//! four clients read every page at once.
//!
//! `RELAY_MANY_QUEUES` sets the number of queues (100,000 by default).

mod common;

use common::KillOnDrop;
use relay::{NewJob, Relay};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");
const TOKEN: &str = "many-queues-token";

fn queues_wanted() -> usize {
    std::env::var("RELAY_MANY_QUEUES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000)
}

/// The server's resident memory, in KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap()
}

struct Http {
    base: String,
    agent: ureq::Agent,
}

impl Http {
    /// The answer's status and text.
    fn get(&self, path: &str) -> (u16, String) {
        let mut res = self
            .agent
            .get(&format!("{}{path}", self.base))
            .header("Authorization", &format!("Bearer {TOKEN}"))
            .call()
            .unwrap();
        let status = res.status().as_u16();
        let body = res.body_mut().with_config().limit(1 << 30).read_to_string().unwrap();
        (status, body)
    }

    fn json(&self, path: &str) -> (Value, usize) {
        let (status, body) = self.get(path);
        assert_eq!(status, 200, "{path}: {body}");
        (serde_json::from_str(&body).unwrap(), body.len())
    }

    /// Every page of `/v1/stats`: the queues' names, in order; the largest
    /// page's size.
    fn every_stats_page(&self) -> (Vec<String>, usize) {
        let (mut names, mut largest) = (Vec::new(), 0);
        let mut path = "/v1/stats".to_owned();
        loop {
            let (v, size) = self.json(&path);
            largest = largest.max(size);
            names.extend(v["queues"].as_object().unwrap().keys().cloned());
            match v["next"].as_str() {
                Some(next) => path = format!("/v1/stats?after={next}"),
                None => return (names, largest),
            }
        }
    }
}

#[test]
fn a_hundred_thousand_queues_cost_each_request_a_page() {
    let n = queues_wanted();
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("many.db");
    let start = Instant::now();
    {
        let relay = Relay::open(&db).unwrap();
        let names: Vec<String> = (0..n).map(|i| format!("queue-{i:06}")).collect();
        for chunk in names.chunks(10_000) {
            relay
                .submit_batch(chunk.iter().map(|q| NewJob::new(q.as_str(), "k", Vec::new())).collect())
                .unwrap();
        }
        // The busiest queue, and a paused one.
        relay
            .submit_batch((0..5).map(|_| NewJob::new("queue-000777", "k", Vec::new())).collect())
            .unwrap();
        relay.pause("queue-000123").unwrap();
    }
    eprintln!("{n} queues written in {:.1?}", start.elapsed());

    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let mut child = Command::new(RELAY)
        .arg("--db")
        .arg(&db)
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .env_remove("RELAY_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (err, base) = common::server_url(&mut child);
    std::thread::spawn(move || for _ in err.lines() {});
    let server = KillOnDrop(child);
    let pid = server.0.id();
    let http = Http {
        base: base.trim_end_matches('/').to_owned(),
        agent: ureq::Agent::config_builder().http_status_as_error(false).build().into(),
    };

    // The first page: 1,000 queues, the totals over all of them.
    let (first, size) = http.json("/v1/stats");
    eprintln!("GET /v1/stats: {size} bytes");
    assert!(size < 512 * 1024, "one page of stats is {size} bytes");
    assert_eq!(first["queues"].as_object().unwrap().len(), 1000.min(n));
    let totals = &first["totals"];
    assert_eq!(totals["queues"], n as u64, "{totals}");
    assert_eq!(totals["paused"], 1);
    assert_eq!(totals["jobs"]["READY"], n as u64 + 5);
    let (small, _) = http.json("/v1/stats?limit=10&after=queue-000120");
    let names: Vec<&String> = small["queues"].as_object().unwrap().keys().collect();
    assert_eq!(names.first().map(|s| s.as_str()), Some("queue-000121"));
    assert_eq!(names.len(), 10);
    assert_eq!(small["queues"]["queue-000123"]["paused"], true);
    assert_eq!(small["next"], "queue-000130");
    assert!(small.get("totals").is_none(), "totals on the first page only");
    let (st, body) = http.get("/v1/stats?limit=1001");
    assert_eq!(st, 400, "{body}");
    // `after` names a queue: a NUL is a 400, not the store's 503.
    let (st, body) = http.get("/v1/stats?after=%00&limit=1");
    assert_eq!(st, 400, "{body}");
    assert!(body.contains("after"), "{body}");
    let (empty, _) = http.json("/v1/stats?after=&limit=1");
    assert_eq!(empty["totals"]["queues"], n as u64, "after= is the first page");
    let (names, _) = http.json("/v1/queues?limit=3&after=queue-000776");
    assert_eq!(
        names["queues"],
        serde_json::json!(["queue-000777", "queue-000778", "queue-000779"])
    );

    // /metrics: the busiest queues by name, the rest summed; its size is
    // the same with 100 queues or 100,000.
    let (st, metrics) = http.get("/metrics");
    assert_eq!(st, 200);
    eprintln!("GET /metrics: {} bytes", metrics.len());
    assert!(metrics.len() < 64 * 1024, "/metrics is {} bytes", metrics.len());
    let labelled: BTreeSet<&str> = metrics
        .lines()
        .filter(|l| l.starts_with("relay_jobs{"))
        .filter_map(|l| l.split('"').nth(1))
        .collect();
    assert!(labelled.len() <= 101, "{} queues labelled", labelled.len());
    assert!(labelled.contains("queue-000777"), "the busiest queue is labelled");
    assert!(metrics.contains(&format!("relay_jobs{{queue=\"(other)\",state=\"READY\"}} {}", n - 100)));
    assert!(metrics.contains(&format!("relay_queues {n}\n")), "the number of queues");
    assert!(metrics.contains("relay_queues_paused 1\n"));

    // The overview: a page of the queue table, and a link to the next.
    let (st, overview) = http.get("/");
    assert_eq!(st, 200);
    eprintln!("GET /: {} bytes", overview.len());
    assert!(overview.len() < 512 * 1024, "the overview is {} bytes", overview.len());
    assert!(
        overview.contains("href=\"/?after=queue-000099\""),
        "a link to the next page"
    );
    let (st, page2) = http.get("/?after=queue-000099");
    assert_eq!(st, 200);
    assert!(page2.contains("data-queue=\"queue-000100\"") && !page2.contains("data-queue=\"queue-000099\""));

    // Four clients read every page at once, twice: every queue once per
    // reading, and the server's memory stays flat.
    let idle = rss_kib(pid);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(idle));
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let start = Instant::now();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let http = Http {
                base: http.base.clone(),
                agent: ureq::Agent::config_builder().http_status_as_error(false).build().into(),
            };
            std::thread::spawn(move || {
                let (names, largest) = http.every_stats_page();
                let (st, m) = http.get("/metrics");
                assert_eq!(st, 200);
                assert!(m.len() < 64 * 1024);
                (names, largest)
            })
        })
        .collect();
    for r in readers {
        let (names, largest) = r.join().unwrap();
        assert_eq!(names.len(), n, "every queue once");
        assert!(names.windows(2).all(|w| w[0] < w[1]), "in order, no queue twice");
        assert!(largest < 512 * 1024, "a page of {largest} bytes");
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    sampler.join().unwrap();
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    eprintln!(
        "four readers of every page: {:.1?}; RSS {} -> {} MiB",
        start.elapsed(),
        idle / 1024,
        peak / 1024
    );
    assert!(peak < 100 * 1024, "the server grew to {} MiB", peak / 1024);
}
