//! Relay's HTTP API from Rust.
//!
//! - [`wire`]: the request and response bodies, the types the server itself
//!   reads its requests with (so a client built on them cannot drift from
//!   it), and responses that keep every field the server sends.
//! - [`Client`] (the `blocking` feature, on by default): one method per
//!   call, on a keep-alive connection pool; `AsyncClient` (the `async`
//!   feature) the same calls as futures, on reqwest and Tokio. Each call is
//!   described once and sent by either.
//! - [`Error`]: the server's typed error (its `code`), a connection that
//!   failed, or an answer that could not be read.
//!
//! ```no_run
//! use relay_client::{wire, Client};
//!
//! # fn main() -> Result<(), relay_client::Error> {
//! let relay = Client::new("http://127.0.0.1:7433").with_token("s3cret");
//! let id = relay.submit(&wire::NewJob::new("emails", "send", br#"{"to":"ada"}"#))?.id;
//! for job in relay.lease(&wire::Lease { queues: vec!["emails".into()], wait_ms: Some(5_000), ..Default::default() })? {
//!     println!("job {} ({}): {:?}", job.id, job.kind, job.payload());
//!     relay.ack(job.id, &wire::Ack::new(job.token, Some(b"sent")))?;
//! }
//! assert_eq!(relay.get(id)?.state, wire::State::Succeeded);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

#[cfg(feature = "async")]
mod r#async;
#[cfg(feature = "blocking")]
mod blocking;
#[cfg(any(feature = "blocking", feature = "async"))]
mod calls;
mod error;
pub mod wire;

#[cfg(feature = "blocking")]
pub use blocking::Client;
pub use error::Error;
#[cfg(feature = "async")]
pub use r#async::AsyncClient;
/// The schemars the wire types' schemas are generated with (feature `schema`).
#[cfg(feature = "schema")]
pub use schemars;
