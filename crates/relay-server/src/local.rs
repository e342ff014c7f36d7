//! The API's calls in this process: [`Local`] runs any call of the table
//! on a `Relay` through the very handlers the server answers HTTP with, so
//! a caller (the CLI on a database file) gets the same answers and errors
//! as from a server, without one.

use crate::calls::{Answered, Req};
use crate::{ApiError, AppState, ServerConfig, ServerError};
use relay::Relay;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// The calls of the API's table, run in process on a [`Relay`].
///
/// ```
/// use relay_client::wire::{calls, NewJob, Nothing};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let local = relay_server::Local::new(relay::Relay::in_memory()?)?;
/// let done = local.call::<calls::Submit>(&(), &Nothing {}, &NewJob::new("emails", "send", b"{}"))?;
/// assert_eq!(local.call::<calls::Get>(&done.id, &Nothing {}, &Nothing {})?.queue, "emails");
/// # Ok(()) }
/// ```
pub struct Local {
    state: Arc<AppState>,
    runtime: tokio::runtime::Runtime,
    relay: Relay,
    // Kept: the handlers watch it for a shutdown that never comes.
    _stop: watch::Sender<bool>,
}

impl std::fmt::Debug for Local {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Local").finish_non_exhaustive()
    }
}

impl Local {
    /// Calls on `relay`. A lease may wait as long as it asks (no server's
    /// limit on long-polls applies).
    ///
    /// # Errors
    ///
    /// The runtime the calls run on could not be made.
    pub fn new(relay: Relay) -> Result<Self, ServerError> {
        let mut config = ServerConfig::new(std::net::SocketAddr::from(([127, 0, 0, 1], 0)));
        config.max_wait = Duration::from_secs(365 * 24 * 3600);
        config.request_timeout = config.max_wait + Duration::from_secs(1);
        let (stop, stopping) = watch::channel(false);
        let state = Arc::new(AppState::new(&relay, config, stopping)?);
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        Ok(Self {
            state,
            runtime,
            relay,
            _stop: stop,
        })
    }

    /// The `Relay` the calls run on.
    pub fn relay(&self) -> &Relay {
        &self.relay
    }

    /// Runs call `C` with its path parameter, query and body; answers as
    /// the server would (its answer type, or its error with the code and
    /// message a server sends).
    ///
    /// # Errors
    ///
    /// The call's errors, as [`ApiError`]s.
    pub fn call<C: Answered>(&self, param: &C::Param, query: &C::Query, body: &C::Body) -> Result<C::Answer, ApiError>
    where
        C::Param: Clone,
    {
        let req = Req {
            param: param.clone(),
            query: copy(query)?,
            body: copy(body)?,
            headers: axum::http::HeaderMap::new(),
        };
        self.runtime.block_on(C::handle(Arc::clone(&self.state), req))
    }
}

/// The call's own copy of a query or body, as the server would read it:
/// through its JSON, so a local call takes exactly what a remote one does.
fn copy<T: serde::Serialize + serde::de::DeserializeOwned>(v: &T) -> Result<T, ApiError> {
    let text =
        serde_json::to_string(v).map_err(|e| ApiError::bad_request(format!("the request does not serialize: {e}")))?;
    serde_json::from_str(&text).map_err(|e| ApiError::bad_request(format!("the body is not valid for this call: {e}")))
}
