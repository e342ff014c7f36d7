//! `relay serve`: the HTTP server on a database file, until SIGINT/SIGTERM.

use crate::args::ServeArgs;
use crate::error::CliError;
use relay::Relay;
use relay_server::{Server, ServerConfig};

pub fn run(relay: Relay, a: ServeArgs, bearer: Option<String>) -> Result<(), CliError> {
    let mut config = ServerConfig::new(a.listen);
    config.tokens = tokens(&a, bearer)?;
    let auth_note = match (config.tokens.len(), a.insecure) {
        (0, false) => {
            Some("no token given (--token-file or RELAY_TOKEN): authentication is off; listening on loopback only")
        }
        (0, true) => Some("no token given: authentication is off and the listener is open to the network (--insecure)"),
        _ => None,
    };
    config.insecure = a.insecure;
    config.max_wait = a.max_wait;
    config.request_timeout = a.max_wait + std::time::Duration::from_secs(30);
    config.max_body_bytes = a.max_body;
    config.shutdown_grace = a.shutdown_grace;
    config.max_connections = a.max_connections as usize;
    config.header_timeout = a.header_timeout;
    config.body_timeout = a.body_timeout;
    config.secure_cookies = a.secure_cookies;
    config.metrics_queues = a.metrics_queues;
    if let Err(e) = relay_server::raise_open_file_limit() {
        eprintln!("relay: cannot raise the open-file limit ({e}); connections are limited by it");
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Io(format!("cannot start the server runtime: {e}")))?;
    rt.block_on(async move {
        let server = Server::bind(relay, config)
            .await
            .map_err(|e| CliError::Usage(e.to_string()))?;
        let addr = server.local_addr().map_err(|e| CliError::Io(e.to_string()))?;
        let stop = stopped();
        eprintln!(
            "relay: serving on http://{addr} (the API under /v1, the dashboard at /; SIGINT or SIGTERM stops it)"
        );
        if let Some(note) = auth_note {
            eprintln!("relay: {note}");
        }
        server.run(stop).await.map_err(|e| CliError::Io(e.to_string()))?;
        eprintln!("relay: stopped");
        Ok(())
    })
}

fn tokens(a: &ServeArgs, bearer: Option<String>) -> Result<Vec<String>, CliError> {
    let mut tokens = Vec::new();
    if let Some(path) = &a.token_file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| CliError::Io(format!("cannot read the token file {}: {e}", path.display())))?;
        tokens.extend(
            text.lines()
                .map(str::trim)
                .filter(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_owned),
        );
        if tokens.is_empty() {
            return Err(CliError::Usage(format!(
                "the token file {} holds no token",
                path.display()
            )));
        }
    }
    if let Some(t) = bearer.as_deref().map(str::trim).filter(|t| !t.is_empty()) {
        tokens.push(t.to_owned());
    }
    Ok(tokens)
}

/// SIGINT or SIGTERM. The handlers are in place when this returns (before
/// the server says it serves), so a supervisor that stops it as soon as it
/// answers gets a graceful stop, not the signal's default action.
fn stopped() -> impl std::future::Future<Output = ()> {
    use tokio::signal::unix::{signal, SignalKind};
    let watched = (signal(SignalKind::interrupt()), signal(SignalKind::terminate()));
    async move {
        let (Ok(mut int), Ok(mut term)) = watched else {
            return std::future::pending().await;
        };
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    }
}
