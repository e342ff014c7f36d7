//! Every request's body, read before its route sees it: bounded in bytes
//! (`--max-body`, 413; `/login` 8 KiB) and in time
//! ([`ServerConfig::body_timeout`], 408), on every route that takes one,
//! the bulk actions and `/login` included, and held as one buffer the
//! size of what the peer sent. The request head is bounded too (431).
//!
//! hyper hands a body over in the pieces the socket gave it, each a view
//! of a read buffer of several KiB; collected as they come, a body sent a
//! byte at a time held about 4 KiB of memory per byte received (issue 39:
//! 200 connections dripping bytes to `/login` took the server from 16 MB
//! to 258 MB). Here each piece is copied into one buffer and the view
//! dropped, so a connection holds what it sent, and no longer than the
//! body deadline.
//!
//! [`ServerConfig::body_timeout`]: crate::ServerConfig::body_timeout

use crate::api::S;
use crate::error::ApiError;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use relay_client::wire::ErrorCode;

/// The largest request head (request line and headers, as sent) the
/// server takes; over it, 431. hyper's buffer bounds it only to the
/// nearest read (a 48 KiB head sent in one write got through).
pub(crate) const MAX_HEAD: usize = crate::conns::MAX_BUF;

/// The largest body `POST /login` takes: a password form.
const LOGIN_MAX: usize = 8 << 10;

/// Refuses a request whose head is over [`MAX_HEAD`] (431), on every
/// route.
pub(crate) async fn bound_head(req: Request, next: Next) -> Response {
    if head_len(&req) > MAX_HEAD {
        return ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            ErrorCode::InvalidRequest,
            format!("the request head is over {} KiB", MAX_HEAD >> 10),
        )
        .into_response();
    }
    next.run(req).await
}

/// Reads the request's body whole (see the module's docs), then passes
/// the request on with it. Layered inside the token and session checks:
/// a caller that is not let in is refused before its body is read.
pub(crate) async fn read_body(State(state): S, req: Request, next: Next) -> Response {
    let limit = state.config.max_body_bytes;
    read(req, next, limit, state.config.body_timeout).await
}

/// [`read_body`] for `POST /login`, which anyone may call: a form of at
/// most 8 KiB.
pub(crate) async fn read_login(State(state): S, req: Request, next: Next) -> Response {
    let limit = state.config.max_body_bytes.min(LOGIN_MAX);
    read(req, next, limit, state.config.body_timeout).await
}

/// The most a completion token's payload may be (64 KiB) and room for its
/// JSON's whitespace.
const OPEN_MAX: usize = 72 * 1024;

/// [`read_body`] for the routes anyone may call without a token
/// (`POST /v1/tokens/{token}/complete`): at most 72 KiB.
pub(crate) async fn read_open(State(state): S, req: Request, next: Next) -> Response {
    let limit = state.config.max_body_bytes.min(OPEN_MAX);
    read(req, next, limit, state.config.body_timeout).await
}

async fn read(req: Request, next: Next, limit: usize, timeout: std::time::Duration) -> Response {
    let (parts, body) = req.into_parts();
    let read = match tokio::time::timeout(timeout, collect(body, limit)).await {
        Ok(read) => read,
        Err(_) => Err(Cut::Late(timeout)),
    };
    match read {
        Ok(bytes) => next.run(Request::from_parts(parts, Body::from(bytes))).await,
        Err(cut) => cut.into_response(),
    }
}

/// Why a body was not read.
enum Cut {
    /// Over the byte limit.
    Large(usize),
    /// Not whole within the deadline.
    Late(std::time::Duration),
    /// The connection failed while sending it.
    Broken(String),
}

impl IntoResponse for Cut {
    fn into_response(self) -> Response {
        let e = match self {
            Cut::Large(limit) => ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                ErrorCode::PayloadTooLarge,
                format!(
                    "the request body is over the server's limit of {limit} bytes (--max-body); nothing was applied"
                ),
            ),
            Cut::Late(t) => ApiError::new(
                StatusCode::REQUEST_TIMEOUT,
                ErrorCode::Timeout,
                format!(
                    "the request body did not arrive whole within {} s (--body-timeout); nothing was applied",
                    t.as_secs_f64()
                ),
            ),
            Cut::Broken(why) => ApiError::bad_request(format!("the request body could not be read: {why}")),
        };
        let mut res = e.into_response();
        // The rest of the body is never read: the connection cannot carry
        // another request.
        res.headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        res
    }
}

/// The body's bytes, copied piece by piece into one buffer.
///
/// A body over `limit` is read on to its end and dropped (up to
/// [`DRAIN_MAX`] bytes, within the same deadline) before the 413 is sent:
/// a client still sending when the server answered and closed got a
/// broken pipe instead of the answer (issue 39: the Rust client said
/// "cannot reach the server" for 12-17 of 30 bodies over `--max-body`).
/// Nothing of it is kept, so a drained body costs no memory.
async fn collect(mut body: Body, limit: usize) -> Result<Vec<u8>, Cut> {
    use http_body_util::BodyExt;
    let hint = http_body::Body::size_hint(&body);
    if hint.upper() == Some(0) {
        return Ok(Vec::new());
    }
    if hint.lower() > DRAIN_MAX {
        return Err(Cut::Large(limit));
    }
    let mut out = Vec::new();
    let mut over = false;
    let mut seen = 0u64;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| Cut::Broken(e.to_string()))?;
        let Ok(data) = frame.into_data() else { continue };
        seen += data.len() as u64;
        if over || out.len() + data.len() > limit {
            over = true;
            out = Vec::new();
            if seen > DRAIN_MAX {
                break;
            }
            continue;
        }
        out.extend_from_slice(&data);
    }
    if over {
        return Err(Cut::Large(limit));
    }
    Ok(out)
}

/// The most of a body over the limit read (and dropped) so that its
/// sender reads the 413: past it the server answers at once and closes.
const DRAIN_MAX: u64 = 64 << 20;

/// The request head's size as sent: the request line and each header
/// line with its `: ` and line ending.
fn head_len(req: &Request) -> usize {
    let line = req.method().as_str().len() + req.uri().to_string().len() + "HTTP/1.1".len() + 4;
    req.headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum::<usize>()
        + line
        + 2
}
