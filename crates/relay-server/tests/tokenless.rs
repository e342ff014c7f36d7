//! Regression (issue 24, item 1): a server without tokens (loopback only)
//! protected its dashboard but not its API: any web page the operator
//! visited could post a plain HTML form to `/v1/jobs/1/cancel` or
//! `/v1/queues/emails/pause` (answered 200, applied), and a DNS-rebinding
//! page read `/v1/jobs` under its own host name. Requests are sent as
//! browsers send them, byte for byte, over a real socket.

use relay::{NewJob, Options, Relay};
use relay_server::ServerConfig;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

mod common;

struct Served {
    addr: SocketAddr,
    relay: Relay,
    _server: common::ServerThread,
    _dir: tempfile::TempDir,
}

fn serve(tokens: &[&str]) -> Served {
    serve_with(tokens, false)
}

fn serve_with(tokens: &[&str], insecure: bool) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let relay = Relay::open_with(dir.path().join("t.db"), Options::default()).unwrap();
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.tokens = tokens.iter().map(|t| (*t).to_owned()).collect();
    config.insecure = insecure;
    let server = common::ServerThread::start(relay.clone(), config);
    Served {
        addr: server.addr,
        relay,
        _server: server,
        _dir: dir,
    }
}

impl Served {
    /// Sends one request with exactly these headers; returns its status and body.
    fn send(&self, method: &str, path: &str, host: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut req = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str(&format!("Content-Length: {}\r\n\r\n{body}", body.len()));
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let status = answer.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
        (status, body)
    }

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.addr.port())
    }
}

const FORM: (&str, &str) = ("Content-Type", "application/x-www-form-urlencoded");
const JSON: (&str, &str) = ("Content-Type", "application/json");

#[test]
fn a_web_page_cannot_change_or_read_a_server_without_tokens() {
    let s = serve(&[]);
    let id = s
        .relay
        .submit(NewJob::new("emails", "send", b"{\"secret\":1}".to_vec()))
        .unwrap();
    let host = s.host();
    let cancel = format!("/v1/jobs/{}/cancel", id.0);
    for (what, headers, body) in [
        ("an HTML form", vec![FORM, ("Origin", "http://evil.example")], "x=1"),
        ("a form without Origin", vec![FORM], "x=1"),
        ("text/plain from fetch", vec![("Content-Type", "text/plain")], "{}"),
        ("no content type", vec![], ""),
        (
            "JSON with another Origin",
            vec![JSON, ("Origin", "http://evil.example")],
            "{}",
        ),
        (
            "JSON marked cross-site",
            vec![JSON, ("Sec-Fetch-Site", "cross-site")],
            "{}",
        ),
    ] {
        let (st, body) = s.send("POST", &cancel, &host, &headers, body);
        assert_eq!(st, 403, "{what}: {body}");
        assert!(body.contains("\"forbidden\""), "{what}: {body}");
        let (st, _) = s.send("POST", "/v1/queues/emails/pause", &host, &headers, "");
        assert_eq!(st, 403, "{what}");
    }
    assert_eq!(
        s.relay.get(id).unwrap().state(),
        relay::JobState::Ready,
        "nothing was cancelled"
    );
    assert!(!s.relay.stats().unwrap().queues["emails"].paused, "nothing was paused");

    // DNS rebinding: another site's name pointed at 127.0.0.1.
    let rebound = format!("evil.example:{}", s.addr.port());
    let (st, body) = s.send("GET", "/v1/jobs", &rebound, &[], "");
    assert_eq!(st, 403, "{body}");
    assert!(!body.contains("secret"), "{body}");

    // The server's own clients: JSON from a loopback name, reads by any tool.
    let (st, body) = s.send("GET", "/v1/jobs", &format!("localhost:{}", s.addr.port()), &[], "");
    assert_eq!(st, 200, "{body}");
    let (st, body) = s.send(
        "POST",
        &cancel,
        &host,
        &[JSON, ("Origin", &format!("http://{host}"))],
        "",
    );
    assert_eq!(st, 200, "a same-origin JSON change: {body}");
    assert_eq!(s.relay.get(id).unwrap().state(), relay::JobState::Cancelled);
}

#[test]
fn with_a_token_the_token_is_what_protects_it() {
    let s = serve(&["secret-token"]);
    let rebound = format!("relay.internal:{}", s.addr.port());
    let auth = ("Authorization", "Bearer secret-token");
    let (st, body) = s.send("GET", "/v1/stats", &rebound, &[auth], "");
    assert_eq!(st, 200, "any host name, with the token: {body}");
    let (st, body) = s.send("POST", "/v1/queues/q/pause", &rebound, &[FORM], "x=1");
    assert_eq!(st, 401, "no token: {body}");
    let (st, body) = s.send(
        "POST",
        "/v1/jobs",
        &rebound,
        &[auth, ("Content-Type", "text/plain")],
        "{}",
    );
    assert_eq!(st, 400, "a body that is not JSON: {body}");
}

/// `--insecure` (tokenless beyond loopback) lifts only the host check: a
/// page on the network still cannot post a form to it.
#[test]
fn insecure_lifts_the_host_check_only() {
    let s = serve_with(&[], true);
    let id = s.relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let lan = format!("relay.lan:{}", s.addr.port());
    let (st, body) = s.send("GET", "/v1/stats", &lan, &[], "");
    assert_eq!(st, 200, "{body}");
    let (st, body) = s.send("POST", &format!("/v1/jobs/{}/cancel", id.0), &lan, &[FORM], "x=1");
    assert_eq!(st, 403, "{body}");
    assert_eq!(s.relay.get(id).unwrap().state(), relay::JobState::Ready);
}
