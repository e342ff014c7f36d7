//! Accepting connections, with what a peer that never authenticates can
//! hold bounded: the server's own loop over hyper (HTTP/1.1), not
//! `axum::serve`, which sets no header deadline and no connection limit.
//!
//! - **A header deadline** ([`ServerConfig::header_timeout`]): a connection
//!   that has not sent a whole request head this long after it opened, or
//!   after its last answer (an idle keep-alive connection), is closed.
//! - **A connection limit** ([`ServerConfig::max_connections`], lowered to
//!   what the process's open-file limit allows): at the limit the server
//!   stops accepting, and says so in the log, until a connection closes;
//!   new ones wait in the kernel's backlog meanwhile.
//! - **A bounded buffer per connection** ([`MAX_BUF`]): a head larger than
//!   that is refused with 431, so a pending connection holds at most that.
//!
//! [`ServerConfig::header_timeout`]: crate::ServerConfig::header_timeout
//! [`ServerConfig::max_connections`]: crate::ServerConfig::max_connections

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

/// The largest read buffer of a connection: a request head (line and
/// headers) must fit in it. A body streams through it in pieces.
pub(crate) const MAX_BUF: usize = 32 << 10;

/// Open files kept free of connections for the store, its journal and logs.
const FILES_RESERVED: u64 = 128;

/// How many connections may be open at once: the configured limit, lowered
/// (with a warning) when the process may not open that many files.
pub(crate) fn connection_limit(configured: usize) -> usize {
    let Ok((soft, _)) = rlimit::Resource::NOFILE.get() else {
        return configured;
    };
    let allowed = usize::try_from(soft.saturating_sub(FILES_RESERVED).max(1)).unwrap_or(usize::MAX);
    if allowed < configured {
        tracing::warn!(
            "at most {allowed} connections at once, not {configured}: the open-file limit is {soft} \
             (raise it with `ulimit -n`, or lower --max-connections)"
        );
        return allowed;
    }
    configured
}

/// What the accept loop needs to know.
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub shutdown_grace: Duration,
}

/// Serves `app` on `listener` until `stopping` turns true; then stops
/// accepting, lets each connection finish its request in flight, and waits
/// for them at most `limits.shutdown_grace`.
pub(crate) async fn serve(
    listener: TcpListener,
    app: axum::Router,
    limits: Limits,
    mut stopping: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .max_buf_size(MAX_BUF);
    let mut at_limit = false;
    loop {
        let slot = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => slot,
            Err(_) => {
                if !at_limit {
                    tracing::warn!(
                        "{} connections open, the limit (--max-connections): new connections wait until one closes",
                        limits.max_connections
                    );
                    at_limit = true;
                }
                tokio::select! {
                    slot = Arc::clone(&slots).acquire_owned() => match slot {
                        Ok(slot) => slot,
                        Err(_) => break,
                    },
                    _ = stopping.wait_for(|s| *s) => break,
                }
            }
        };
        if at_limit && slots.available_permits() * 10 >= limits.max_connections {
            tracing::info!("connections below the limit again");
            at_limit = false;
        }
        let (stream, _peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and the like: the connection stays in the
                    // backlog; pausing keeps this loop from spinning.
                    tracing::warn!("cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = stopping.wait_for(|s| *s) => break,
        };
        let _ = stream.set_nodelay(true);
        let conn = http.serve_connection(TokioIo::new(stream), TowerToHyperService::new(app.clone()));
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            let _ = conn.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(limits.shutdown_grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            "connections still open {:?} after the shutdown began are no longer waited for (--shutdown-grace); they end with the process",
            limits.shutdown_grace
        );
    }
}

/// Raises this process's soft limit on open files to its hard limit (each
/// connection is one), and returns the limit now in force. For a program
/// that serves: [`Server::run`](crate::Server::run) sizes its connection
/// limit by it.
pub fn raise_open_file_limit() -> std::io::Result<u64> {
    rlimit::increase_nofile_limit(u64::MAX)
}
