//! Connection floods against a real `relay serve` (issue 24, item 2): peers
//! that never authenticate must not take the server from the callers that
//! do. Before the fix, 1,100 idle connections (past the usual soft limit of
//! 1,024 open files) left an authenticated request unanswered, and 1,000
//! connections dribbling their headers held 421 MiB.
//!
//! The short flood runs in CI; `scripts/flood` runs the long one (more
//! connections, longer) through the same test with `RELAY_FLOOD_CONNECTIONS`
//! and `RELAY_FLOOD_SECONDS`, and prints its figures.

mod common;

use common::KillOnDrop;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");
const TOKEN: &str = "flood-test-token";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// `relay serve` started under a soft limit of 1,024 open files (what most
/// machines give a process), with a token; its stderr lines are collected.
fn serve(dir: &std::path::Path, extra: &[&str]) -> (KillOnDrop, String, std::sync::mpsc::Receiver<String>) {
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{TOKEN}\n")).unwrap();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(r#"ulimit -Sn 1024 && exec "$0" "$@""#)
        .arg(RELAY)
        .arg("--db")
        .arg(dir.join("flood.db"))
        .args(["serve", "--listen", "127.0.0.1:0", "--token-file"])
        .arg(&tokens)
        .args(extra)
        .env_remove("RELAY_TOKEN")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (err, url) = common::server_url(&mut child);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in err.lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (KillOnDrop(child), url.trim_start_matches("http://").to_owned(), rx)
}

/// An authenticated `GET /v1/stats` on a new connection: its status and
/// how long the answer took.
fn authenticated_request(addr: &str) -> (u16, Duration) {
    let start = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        s,
        "GET /v1/stats HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    let _ = s.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (status, start.elapsed())
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap();
    kib / 1024.0
}

/// 2,000 connections (by default) that open, send part of a request head
/// and then one more byte a second: the server keeps answering an
/// authenticated caller within 1 s and its memory stays under 100 MiB
/// (for more connections, under 16 KiB each).
#[test]
fn a_flood_of_dribbling_connections_leaves_room_for_an_authenticated_caller() {
    let connections = env_or("RELAY_FLOOD_CONNECTIONS", 2_000) as usize;
    let seconds = env_or("RELAY_FLOOD_SECONDS", 10);
    // This process holds the flood's sockets: its own soft limit must allow them.
    rlimit::increase_nofile_limit(connections as u64 + 256).unwrap();
    let dir = tempfile::tempdir().unwrap();
    // The deadline outlasts the flood: every connection is held throughout.
    let header_timeout = format!("{}s", seconds + 30);
    let (server, addr, _log) = serve(dir.path(), &["--header-timeout", &header_timeout]);
    let pid = server.0.id();
    let idle_rss = rss_mib(pid);

    let mut flood = Vec::with_capacity(connections);
    for i in 0..connections {
        let mut s = TcpStream::connect(&addr).unwrap_or_else(|e| panic!("connection {i}: {e}"));
        s.set_nonblocking(true).unwrap();
        let _ = write!(s, "GET /v1/stats HTTP/1.1\r\nHost: {addr}\r\nX-Slow: ");
        flood.push(s);
    }
    eprintln!("flood: {connections} connections open, dribbling a byte a second each for {seconds} s");

    let mut slowest = Duration::ZERO;
    let mut peak_rss = idle_rss;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(seconds) {
        for s in &mut flood {
            let _ = s.write(b"a");
        }
        let (status, took) = authenticated_request(&addr);
        assert_eq!(status, 200, "the authenticated request after {:?}", start.elapsed());
        slowest = slowest.max(took);
        peak_rss = peak_rss.max(rss_mib(pid));
        std::thread::sleep(Duration::from_secs(1).saturating_sub(took));
    }
    // The flood was held open throughout, not shed: every socket is still
    // writable and has had no answer.
    let mut open = 0;
    for s in &mut flood {
        let mut buf = [0u8; 1];
        if matches!(s.read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock) {
            open += 1;
        }
    }
    eprintln!(
        "flood: {open} of {connections} still open after {seconds} s; authenticated requests: slowest {:.1} ms; \
         server RSS {idle_rss:.1} MiB idle, {peak_rss:.1} MiB at most",
        slowest.as_secs_f64() * 1e3
    );
    assert_eq!(open, connections, "the flood's connections were closed early");
    assert!(
        slowest < Duration::from_secs(1),
        "an authenticated request took {slowest:?}"
    );
    // Under 100 MiB for the 2,000 of CI; past that, a bounded cost per
    // held connection (measured ~15 KiB: its task, hyper's state and an
    // 8 KiB read buffer) over the idle server.
    let bound = 100f64.max(idle_rss + 16.0 * connections as f64 / 1024.0);
    assert!(
        peak_rss < bound,
        "the server held {peak_rss:.1} MiB (bound {bound:.0} MiB)"
    );
}

/// A connection that does not finish its request head within
/// `--header-timeout` is closed; so is one idle that long after an answer.
#[test]
fn a_connection_without_a_whole_head_is_closed_at_the_header_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _log) = serve(dir.path(), &["--header-timeout", "1s"]);
    let mut partial = TcpStream::connect(&addr).unwrap();
    partial.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(partial, "GET /v1/stats HTTP/1.1\r\nHost: {addr}\r\n").unwrap();
    let start = Instant::now();
    let mut rest = Vec::new();
    let read = partial.read_to_end(&mut rest);
    assert!(
        read.is_ok(),
        "{read:?}: the server did not close the connection within 10 s"
    );
    let took = start.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "closed after {took:?}, before the deadline"
    );

    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(
        idle,
        "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    )
    .unwrap();
    let mut answer = Vec::new();
    let read = idle.read_to_end(&mut answer);
    assert!(
        read.is_ok(),
        "{read:?}: an idle keep-alive connection was still open after 10 s"
    );
    assert!(
        answer.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&answer)
    );
}

/// At `--max-connections` the server stops accepting and says so; a
/// caller waits in the backlog until a connection closes (here, at the
/// header deadline), then is answered.
#[test]
fn at_the_connection_limit_new_callers_wait_and_the_log_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, log) = serve(dir.path(), &["--max-connections", "20", "--header-timeout", "2s"]);
    let held: Vec<TcpStream> = (0..20).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    let (status, took) = authenticated_request(&addr);
    assert_eq!(status, 200);
    assert!(
        took >= Duration::from_millis(500),
        "answered after {took:?}: was the limit applied?"
    );
    let said: Vec<String> = log.try_iter().collect();
    assert!(
        said.iter().any(|l| l.contains("--max-connections")),
        "no log line about the limit in {said:?}"
    );
    drop(held);
}

/// A request head larger than the connection's buffer is refused (431),
/// not buffered without bound.
#[test]
fn a_request_head_over_the_buffer_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _log) = serve(dir.path(), &[]);
    let mut s = TcpStream::connect(&addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let big = "a".repeat(64 << 10);
    let _ = write!(s, "GET /healthz HTTP/1.1\r\nHost: {addr}\r\nX-Big: {big}\r\n\r\n");
    let mut line = String::new();
    let _ = BufReader::new(s).read_line(&mut line);
    assert!(line.starts_with("HTTP/1.1 431"), "{line:?}");
}

/// Opens `n` connections that each send a request head for `path` with a
/// body of `declared` bytes, and no byte of the body yet.
fn body_senders(addr: &str, path: &str, n: usize, declared: usize, auth: bool) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(addr).unwrap_or_else(|e| panic!("connection {i}: {e}"));
            s.set_nodelay(true).unwrap();
            let bearer = if auth {
                format!("Authorization: Bearer {TOKEN}\r\n")
            } else {
                String::new()
            };
            write!(
                s,
                "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{bearer}Content-Type: application/json\r\n\
                 Content-Length: {declared}\r\n\r\n"
            )
            .unwrap();
            s.set_nonblocking(true).unwrap();
            s
        })
        .collect()
}

/// Issue 39, item 2: bodies sent a byte at a time held about 4 KiB of the
/// server's memory per byte received (hyper's read buffer behind each
/// one-byte piece), without a login: 200 connections dripping to
/// `POST /login` took it from 16 MB to 258 MB. Each connection now holds
/// what it sent. Seen failing with the body reader taken out: RSS grew
/// by more than the bound here.
#[test]
fn bodies_dripped_a_byte_at_a_time_hold_what_they_sent() {
    let connections = 200;
    let dir = tempfile::tempdir().unwrap();
    let (server, addr, _log) = serve(dir.path(), &["--body-timeout", "60s"]);
    let pid = server.0.id();
    let idle_rss = rss_mib(pid);
    let mut login = body_senders(&addr, "/login", connections / 2, 8 << 10, false);
    let mut bulk = body_senders(&addr, "/v1/jobs/bulk", connections / 2, 1 << 20, true);
    let mut peak_rss = idle_rss;
    let mut sent = 0usize;
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(8) {
        for s in login.iter_mut().chain(bulk.iter_mut()) {
            if s.write(b" ").is_ok() {
                sent += 1;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
        peak_rss = peak_rss.max(rss_mib(pid));
    }
    let (status, took) = authenticated_request(&addr);
    eprintln!(
        "{sent} body bytes dripped over {connections} connections: server RSS {idle_rss:.1} MiB idle, \
         {peak_rss:.1} MiB at most; an authenticated request took {:.1} ms",
        took.as_secs_f64() * 1e3
    );
    assert_eq!(status, 200);
    // ~70,000 bytes sent: at 4 KiB a byte that is 270 MiB; held as sent,
    // well under 1 MiB beside hyper's buffers of the connections.
    let grown = peak_rss - idle_rss;
    assert!(grown < 40.0, "the server grew by {grown:.1} MiB for {sent} body bytes");
}

/// Issue 39, item 2: a body not whole within `--body-timeout` is answered
/// 408 and its connection closed, on every route: `POST /v1/jobs/bulk`
/// (exempt from the request deadline) and `POST /login` were held open
/// for as long as the peer kept them (50 were still open after 134 s).
/// Seen failing before the body reader: no answer within 10 s.
#[test]
fn a_body_not_whole_by_the_body_deadline_is_answered_408_on_every_route() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _log) = serve(dir.path(), &["--body-timeout", "1s"]);
    for (path, auth) in [("/v1/jobs/bulk", true), ("/login", false), ("/v1/jobs", true)] {
        let mut s = body_senders(&addr, path, 1, 1_000, auth).pop().unwrap();
        s.set_nonblocking(false).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s.write_all(b"{\"filter\":").unwrap();
        let start = Instant::now();
        let mut answer = Vec::new();
        let read = s.read_to_end(&mut answer);
        let answer = String::from_utf8_lossy(&answer);
        assert!(read.is_ok(), "{path}: {read:?}: no answer within 10 s");
        assert!(answer.starts_with("HTTP/1.1 408"), "{path}: {answer}");
        assert!(answer.contains("\"timeout\""), "{path}: {answer}");
        assert!(answer.contains("nothing was applied"), "{path}: {answer}");
        let took = start.elapsed();
        assert!(took >= Duration::from_millis(900), "{path}: answered after {took:?}");
    }
}

/// Issue 39, item 7: a head of 33-48 KiB sent in one write was taken,
/// though the server's bound is 32 KiB. Seen failing: 200.
#[test]
fn a_request_head_over_32_kib_is_refused_whole() {
    let dir = tempfile::tempdir().unwrap();
    let (_server, addr, _log) = serve(dir.path(), &[]);
    for size in [20 << 10, 34 << 10, 40 << 10, 47 << 10] {
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let filler = "a".repeat(size);
        // In one write, as the report sent it.
        let head = format!(
            "GET /v1/stats HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nX-Filler: {filler}\r\n\
             Connection: close\r\n\r\n"
        );
        s.write_all(head.as_bytes()).unwrap();
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        let want = if size < 32 << 10 {
            "HTTP/1.1 200"
        } else {
            "HTTP/1.1 431"
        };
        assert!(answer.starts_with(want), "{size} bytes of header: {answer:.200}");
    }
}
