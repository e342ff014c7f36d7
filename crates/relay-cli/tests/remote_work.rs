//! `relay --server URL work --exec`: the runner against a real `relay
//! serve` (issue "Relay from any language", item 1): the same command
//! contract as on a file, graceful SIGTERM, and a server that goes away and
//! comes back.

mod common;

use common::KillOnDrop;
use relay::{JobId, JobState, NewJob, Relay};
use serde_json::Value;
use std::io::{BufRead, Read};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const RELAY: &str = env!("CARGO_BIN_EXE_relay");
const TOKEN: &str = "remote-work-token";

/// `relay serve` on `db` at 127.0.0.1:`port` (0: any), with a token.
fn serve(db: &Path, port: u16) -> (KillOnDrop, String) {
    let mut child = Command::new(RELAY)
        .arg("--db")
        .arg(db)
        .args(["serve", "--listen", &format!("127.0.0.1:{port}")])
        .env("RELAY_TOKEN", TOKEN)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (err, url) = common::server_url(&mut child);
    std::thread::spawn(move || for _ in err.lines() {});
    (KillOnDrop(child), url)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The runner against `url`; stdout and stderr piped.
fn runner(url: &str, args: &[&str]) -> Child {
    Command::new(RELAY)
        .args(["--server", url, "--auth", TOKEN, "work", "--queue", "q"])
        .args(args)
        .env_remove("RELAY_DB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ok() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn sigterm(child: &Child) {
    assert!(Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap()
        .success());
}

/// Stops the runner with SIGTERM; returns its exit success, stdout, stderr.
fn stop(mut child: Child) -> (bool, String, String) {
    sigterm(&child);
    let (mut out, mut err) = (String::new(), String::new());
    child.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let status = child.wait().unwrap();
    (status.success(), out, err)
}

#[test]
fn jobs_run_as_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remote.db");
    let (_server, url) = serve(&db, 0);
    let relay = Relay::open(&db).unwrap();
    let ids: Vec<JobId> = (0..10)
        .map(|i| relay.submit(NewJob::new("q", "k", format!(r#"{{"n":{i}}}"#))).unwrap())
        .collect();
    let failing = relay.submit(NewJob::new("q", "fail", Vec::new())).unwrap();
    let cmd = r#"if [ "$RELAY_JOB_KIND" = fail ]; then echo broken >&2; exit 3; fi; echo "{\"token\":$RELAY_LEASE_TOKEN,\"attempt\":$RELAY_ATTEMPT}" >&3; echo '{"progress":0.5}' >&3; cat"#;
    let child = runner(&url, &["--exec", cmd, "--concurrency", "4", "--json"]);
    wait_for("every job to run", || {
        ids.iter()
            .all(|id| relay.get(*id).unwrap().state() == JobState::Succeeded)
            && relay.get(failing).unwrap().status.last_error.is_some()
    });
    let (ok, out, err) = stop(child);
    assert!(ok, "exit status 0 after SIGTERM: {err}");
    for (i, id) in ids.iter().enumerate() {
        let job = relay.get(*id).unwrap();
        assert_eq!(
            job.result.as_deref(),
            Some(format!(r#"{{"n":{i}}}"#).as_bytes()),
            "stdout is the result"
        );
        let progress = relay
            .events(*id)
            .unwrap()
            .into_iter()
            .find(|e| e.kind == "progress")
            .unwrap();
        assert_eq!(
            progress.data["token"], job.status.last_token.0,
            "RELAY_LEASE_TOKEN and fd 3"
        );
        assert_eq!(progress.data["attempt"], 1);
        let kept = job.progress.expect("fd 3's report, over HTTP, kept on the job");
        assert_eq!((kept.fraction, kept.attempt), (0.5, 1));
    }
    let error = relay.get(failing).unwrap().status.last_error.unwrap();
    assert!(error.contains("exit status 3") && error.contains("broken"), "{error}");
    let lines: Vec<Value> = out.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let succeeded = lines.iter().filter(|l| l["outcome"] == "succeeded").count();
    assert_eq!(succeeded, 10, "one JSON line per outcome: {out}");
    assert!(lines.iter().any(|l| l["outcome"] == "failed" && l["id"] == failing.0));
}

#[test]
fn sigterm_releases_a_running_job() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remote.db");
    let (_server, url) = serve(&db, 0);
    let relay = Relay::open(&db).unwrap();
    let id = relay.submit(NewJob::new("q", "slow", Vec::new())).unwrap();
    let pid_file = dir.path().join("command.pid");
    let cmd = format!("echo $$ > {}; exec sleep 60", pid_file.display());
    let child = runner(&url, &["--exec", &cmd, "--grace", "300ms"]);
    wait_for("the job to be leased and its command to start", || {
        relay.get(id).unwrap().state() == JobState::Leased
            && std::fs::read_to_string(&pid_file).is_ok_and(|p| p.ends_with('\n'))
    });
    let started = Instant::now();
    let (ok, _, err) = stop(child);
    assert!(ok, "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "stopped within the grace period"
    );
    let job = relay.get(id).unwrap();
    assert_eq!((job.state(), job.status.attempts), (JobState::Ready, 0), "{err}");
    assert_eq!(relay.events(id).unwrap().last().unwrap().kind, "released");
    assert!(err.contains("1 released"), "{err}");
    // Its command was stopped with it: a released job must not run on here
    // while another worker runs it.
    let pid = std::fs::read_to_string(&pid_file).unwrap().trim().to_owned();
    let proc = std::path::Path::new("/proc").join(&pid);
    let deadline = Instant::now() + Duration::from_secs(5);
    while proc.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!proc.exists(), "the command (pid {pid}) outlived its runner");
}

#[test]
fn a_server_that_goes_away_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remote.db");
    let port = free_port();
    let (server, url) = serve(&db, port);
    let relay = Relay::open(&db).unwrap();
    let first = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let child = runner(&url, &["--exec", "true"]);
    wait_for("the first job", || {
        relay.get(first).unwrap().state() == JobState::Succeeded
    });
    // The runner's stderr, read as it comes: the server comes back only
    // once the runner has said it lost it (a loaded machine may keep the
    // runner from asking for its next job for seconds).
    let mut child = child;
    let said = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let reader = {
        let said = said.clone();
        let stderr = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                let mut said = said.lock().unwrap();
                said.push_str(&line);
                said.push('\n');
            }
        })
    };
    drop(server); // SIGKILL
    wait_for("the runner to notice the outage", || {
        said.lock().unwrap().contains("retrying with back-off")
    });
    // Its back-off grows while the server is away.
    std::thread::sleep(Duration::from_millis(1000));
    assert!(
        child.try_wait().unwrap().is_none(),
        "the runner carries on without its server"
    );
    let (_server, _) = serve(&db, port);
    let second = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    wait_for("a job after the server came back", || {
        relay.get(second).unwrap().state() == JobState::Succeeded
    });
    sigterm(&child);
    let ok = child.wait().unwrap().success();
    reader.join().unwrap();
    let err = said.lock().unwrap().clone();
    assert!(ok, "{err}");
    assert_eq!(
        err.matches("retrying with back-off").count(),
        1,
        "said once per outage: {err}"
    );
    assert!(err.contains("the server answers again"), "{err}");
    // A refused token is not an outage: the runner says why and stops.
    let out = Command::new(RELAY)
        .args(["--server", &url, "--auth", "wrong", "work", "-q", "q", "--exec", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("401") && err.contains("--auth TOKEN or RELAY_TOKEN"),
        "{err}"
    );
}

#[test]
fn a_command_longer_than_its_lease_keeps_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remote.db");
    let (_server, url) = serve(&db, 0);
    let relay = Relay::open(&db).unwrap();
    let id = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    // Renewed every 667 ms: each renewal has more than a second to spare on a
    // loaded machine.
    let child = runner(&url, &["--exec", "sleep 5", "--lease-for", "2s"]);
    wait_for("the job", || relay.get(id).unwrap().state() == JobState::Succeeded);
    let (ok, _, err) = stop(child);
    assert!(ok, "{err}");
    let kinds: Vec<String> = relay.events(id).unwrap().into_iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds,
        ["submitted", "leased", "succeeded"],
        "heartbeats kept the lease: {err}"
    );
}

/// Over HTTP too, a job's trace context reaches its command as
/// RELAY_TRACEPARENT and TRACEPARENT.
#[test]
fn the_trace_context_reaches_the_command_over_http() {
    const A: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("remote.db");
    let (_server, url) = serve(&db, 0);
    let relay = Relay::open(&db).unwrap();
    let traced = relay.submit(NewJob::new("q", "k", Vec::new()).traceparent(A)).unwrap();
    let plain = relay.submit(NewJob::new("q", "k", Vec::new())).unwrap();
    let child = runner(
        &url,
        &["--exec", r#"printf '%s|%s' "$RELAY_TRACEPARENT" "$TRACEPARENT""#],
    );
    wait_for("both jobs to run", || {
        [traced, plain]
            .iter()
            .all(|id| relay.get(*id).unwrap().state() == JobState::Succeeded)
    });
    let _ = stop(child);
    let result = |id: JobId| String::from_utf8(relay.get(id).unwrap().result.unwrap_or_default()).unwrap();
    assert_eq!(result(traced), format!("{A}|{A}"));
    assert_eq!(result(plain), "|");
}

/// A server that answers 200 with something that is not Relay's answer (a
/// proxy's page, another version): the lease may have been taken, so the
/// runner stops and says so instead of retrying as if the server were away.
#[test]
fn an_answer_it_cannot_read_stops_the_runner() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { return };
            let mut buf = [0u8; 4096];
            let _ = std::io::Read::read(&mut s, &mut buf);
            let body = "<html>maintenance</html>";
            let _ = std::io::Write::write_all(
                &mut s,
                format!(
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                )
                .as_bytes(),
            );
        }
    });
    let child = KillOnDrop(runner(&url, &["--exec", "true"]));
    let started = Instant::now();
    let mut child = child;
    let status = loop {
        if let Some(s) = child.0.try_wait().unwrap() {
            break s;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the runner kept retrying");
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut err = String::new();
    child.0.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains("not understood") && err.contains("maintenance"), "{err}");
    assert!(!err.contains("retrying"), "treated as an outage: {err}");
}
