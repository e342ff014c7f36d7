//! Relay over HTTP: every library call as JSON, so that workers and
//! producers in any language reach the same engine (and share its group
//! commit).
//!
//! - [`Server::bind`] then [`Server::run`]: axum routes on hyper and tokio,
//!   with bearer-token auth ([`ServerConfig::tokens`], compared in constant
//!   time), a body size limit, a cap on waiting long-polls, a request
//!   timeout, and (`conns`) a header deadline, a connection limit and a
//!   bounded buffer per connection.
//! - `api`: the routes under `/v1`, plus `/healthz` and `/metrics`.
//! - `error`: JSON errors (`{"error": {"code", "message"}}`) with statuses a
//!   client can act on: 400, 401, 404, 409, 413, 429, 503.
//!
//! ```no_run
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let relay = relay::Relay::open("jobs.db")?;
//! let config = relay_server::ServerConfig::new("127.0.0.1:7433".parse()?);
//! let server = relay_server::Server::bind(relay, config).await?;
//! server.run(async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod api;
mod auth;
mod body;
mod calls;
mod conns;
mod dashboard;
mod error;
mod local;
mod metrics;
mod openapi;
mod parse;
mod site;
mod work;

pub use calls::Answered;
pub use conns::raise_open_file_limit;
pub use error::ApiError;
pub use local::Local;

use axum::http::StatusCode;
use axum::middleware;
use axum::Router;
use relay::Relay;
use relay_client::wire::ErrorCode;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{watch, Semaphore};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    pub listen: SocketAddr,
    /// Accepted bearer tokens; empty means no auth, allowed only on loopback
    /// unless `insecure`.
    pub tokens: Vec<String>,
    pub insecure: bool,
    /// Largest request body, in bytes.
    pub max_body_bytes: usize,
    /// Longest a lease request may wait for a job.
    pub max_wait: Duration,
    /// Lease requests allowed to wait at once; more get 429.
    pub max_waiting: usize,
    /// A request still unanswered after this long is cut off (slow clients).
    pub request_timeout: Duration,
    /// A connection that has not sent a whole request head this long after
    /// it opened or after its last answer is closed (slow or idle peers).
    pub header_timeout: Duration,
    /// A request whose body has not arrived whole this long after its
    /// head is answered 408 and its connection closed, on every route
    /// (the bulk actions, exempt from `request_timeout`, included).
    pub body_timeout: Duration,
    /// Connections open at once; at the limit the server stops accepting
    /// (and logs it) until one closes. Lowered to what the process's
    /// open-file limit allows.
    pub max_connections: usize,
    /// After a shutdown begins, connections still open this long later (a
    /// client sending its body slowly, say) are no longer waited for:
    /// [`Server::run`] returns.
    pub shutdown_grace: Duration,
    /// The dashboard's session cookies carry `Secure` (browsers send them
    /// over HTTPS only): for a server behind a TLS proxy.
    pub secure_cookies: bool,
    /// `/metrics` labels this many queues, those with the most READY jobs
    /// (the rest under `queue="(other)"`), so that its size and the
    /// series a scraper keeps do not grow with the number of queues.
    pub metrics_queues: u32,
}

impl ServerConfig {
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            tokens: Vec::new(),
            insecure: false,
            max_body_bytes: 2 << 20,
            max_wait: Duration::from_secs(60),
            max_waiting: 1024,
            request_timeout: Duration::from_secs(90),
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            secure_cookies: false,
            shutdown_grace: Duration::from_secs(20),
            metrics_queues: 100,
        }
    }

    fn check(&self) -> Result<(), ServerError> {
        if self.tokens.is_empty() && !self.insecure && !self.listen.ip().is_loopback() {
            return Err(ServerError::Config(format!(
                "refusing to listen on {} without a token: set --token-file or RELAY_TOKEN, or pass --insecure",
                self.listen
            )));
        }
        if self.max_connections == 0 || self.header_timeout.is_zero() || self.body_timeout.is_zero() {
            return Err(ServerError::Config(
                "the connection limit and the header and body deadlines must be above zero".into(),
            ));
        }
        if self.tokens.iter().any(|t| t.trim().is_empty()) {
            return Err(ServerError::Config("a token is empty".into()));
        }
        if self.request_timeout <= self.max_wait {
            return Err(ServerError::Config(
                "the request timeout must be longer than the longest lease wait".into(),
            ));
        }
        Ok(())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("{0}")]
    Config(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
    #[error("server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// What every request handler shares.
pub(crate) struct AppState {
    pub relay: relay::AsyncRelay,
    pub config: ServerConfig,
    pub waiting: Semaphore,
    pub stopping: watch::Receiver<bool>,
    pub metrics: metrics::Metrics,
    /// A request carried a token to a server that has none: said once.
    pub told_auth_off: std::sync::atomic::AtomicBool,
    /// What the dashboard's sessions are signed with.
    pub dash: dashboard::Keys,
}

impl AppState {
    fn new(relay: &Relay, config: ServerConfig, stopping: watch::Receiver<bool>) -> Result<Self, ServerError> {
        let mut dash = dashboard::Keys::new(&config.tokens).map_err(ServerError::Config)?;
        dash.secure = config.secure_cookies;
        Ok(AppState {
            dash,
            relay: relay.to_async(),
            waiting: Semaphore::new(config.max_waiting),
            config,
            stopping,
            metrics: metrics::Metrics::default(),
            told_auth_off: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// A bound, not yet running, server.
pub struct Server {
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Server {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Server")
            .field("listen", &self.listener.local_addr().ok())
            .field("auth", &!self.state.config.tokens.is_empty())
            .finish_non_exhaustive()
    }
}

impl Server {
    pub async fn bind(relay: Relay, config: ServerConfig) -> Result<Self, ServerError> {
        config.check()?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ServerError::Bind {
                addr: config.listen,
                source,
            })?;
        let (stop, stopping) = watch::channel(false);
        let state = Arc::new(AppState::new(&relay, config, stopping)?);
        Ok(Self { listener, state, stop })
    }

    pub fn local_addr(&self) -> Result<SocketAddr, ServerError> {
        Ok(self.listener.local_addr()?)
    }

    /// Serves until `shutdown` completes; then stops accepting, answers
    /// waiting long-polls with no jobs, finishes requests in flight, and
    /// returns; connections still open [`ServerConfig::shutdown_grace`]
    /// later are no longer waited for (a change the writer already holds
    /// is committed all the same when the `Relay` is dropped). Their tasks
    /// end with the runtime: `relay serve` exits, which closes them; a
    /// program that embeds the server keeps them until its runtime shuts
    /// down.
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServerError> {
        let app = router(Arc::clone(&self.state));
        let stop = self.stop;
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
        });
        let config = &self.state.config;
        let limits = conns::Limits {
            max_connections: conns::connection_limit(config.max_connections),
            header_timeout: config.header_timeout,
            shutdown_grace: config.shutdown_grace,
        };
        conns::serve(self.listener, app, limits, self.state.stopping.clone()).await;
        Ok(())
    }
}

// A bound server is moved into the task or thread that runs it: checked at
// compile time.
const _: () = {
    const fn sent<T: Send>() {}
    sent::<Server>();
    sent::<ServerConfig>();
};

/// The routes beside the table of calls (`/metrics` behind the tokens,
/// `/healthz` open), each once; a test holds `/openapi.json` to these and
/// the table (every route documented, every documented operation routed).
macro_rules! api_routes {
    ($($access:ident $method:ident $path:literal => $handler:path;)*) => {
        /// The routes beside the table: method and path, as `/openapi.json`
        /// names them.
        #[cfg_attr(not(test), allow(dead_code))]
        pub(crate) const API_ROUTES: &[(&str, &str)] = &[$((stringify!($method), $path)),*];

        /// The table's calls (`calls::router`) and the routes of
        /// [`API_ROUTES`] on their handlers: the calls and those marked
        /// `token` behind the bearer tokens, `open` ones without.
        fn api_router(state: &Arc<AppState>) -> Router<Arc<AppState>> {
            #[allow(unused_mut)] // when one side has no route
            let (mut protected, mut open) = (calls::router(), Router::new());
            $(api_routes!(@add $access, protected, open, $method, $path, $handler);)*
            protected
                .layer(middleware::from_fn_with_state(Arc::clone(state), body::read_body))
                .route_layer(middleware::from_fn_with_state(Arc::clone(state), auth::require_token))
                // Open routes read their bodies under tighter bounds (no
                // token stands behind a caller).
                .merge(open.layer(middleware::from_fn_with_state(Arc::clone(state), body::read_open)))
        }
    };
    (@add token, $p:ident, $o:ident, $method:ident, $path:literal, $handler:path) => {
        $p = $p.route($path, axum::routing::$method($handler));
    };
    (@add open, $p:ident, $o:ident, $method:ident, $path:literal, $handler:path) => {
        $o = $o.route($path, axum::routing::$method($handler));
    };
}

api_routes! {
    token get "/metrics" => api::metrics;
    open get "/healthz" => api::healthz;
    open post "/v1/tokens/{token}/complete" => api::complete_token;
}

/// Every route: the API's (`/v1` and `/metrics` behind the tokens), the
/// dashboard, `/healthz` and `/openapi.json`.
fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .merge(api_router(&state))
        .merge(dashboard::router(Arc::clone(&state)))
        .route("/openapi.json", axum::routing::get(api::openapi))
        .fallback(|| async {
            ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NoRoute,
                "no such endpoint; see /openapi.json",
            )
        })
        .layer(middleware::from_fn_with_state(Arc::clone(&state), api::observe))
        .layer(axum::extract::DefaultBodyLimit::max(state.config.max_body_bytes))
        .layer(middleware::from_fn_with_state(Arc::clone(&state), api::deadline))
        .layer(middleware::from_fn(body::bound_head))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::API_ROUTES;
    use std::collections::BTreeSet;

    /// `/openapi.json` documents exactly the routes the server has: a
    /// route without an operation, or an operation without a route, fails.
    #[test]
    fn every_route_is_documented_and_every_operation_routed() {
        let config = crate::ServerConfig::new("127.0.0.1:0".parse().unwrap());
        let doc = crate::openapi::document(&config);
        let documented: BTreeSet<(String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, ops)| ops.as_object().unwrap().keys().map(move |m| (m.clone(), path.clone())))
            .filter(|(m, _)| m != "parameters")
            .collect();
        let routed: BTreeSet<(String, String)> = API_ROUTES
            .iter()
            .map(|(m, p)| ((*m).to_owned(), (*p).to_owned()))
            .chain(
                relay_client::wire::CALLS
                    .iter()
                    .map(|c| (c.method.as_str().to_lowercase(), c.path.to_owned())),
            )
            .collect();
        // Each call once, under the operation name the document gives it.
        let named: BTreeSet<(String, String, String)> = doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, ops)| {
                ops.as_object().unwrap().iter().map(move |(m, op)| {
                    (
                        m.clone(),
                        path.clone(),
                        op["operationId"].as_str().unwrap_or("").to_owned(),
                    )
                })
            })
            .collect();
        for c in relay_client::wire::CALLS {
            let key = (
                c.method.as_str().to_lowercase(),
                c.path.to_owned(),
                c.operation.to_owned(),
            );
            assert!(named.contains(&key), "the table's {key:?} is not so in /openapi.json");
        }
        let undocumented: Vec<_> = routed.difference(&documented).collect();
        let unrouted: Vec<_> = documented.difference(&routed).collect();
        assert!(
            undocumented.is_empty(),
            "routes without an operation in /openapi.json: {undocumented:?}"
        );
        assert!(
            unrouted.is_empty(),
            "operations in /openapi.json without a route: {unrouted:?}"
        );
    }
}
