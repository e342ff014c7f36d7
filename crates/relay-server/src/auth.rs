//! Bearer-token auth, compared in constant time against every token.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use relay_client::wire::ErrorCode;
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let tokens = &state.config.tokens;
    if tokens.is_empty() {
        browser_guard(&req, state.config.insecure)?;
        // Answered as any request (auth is off), but a client that sends a
        // token probably expects it checked: say so, once.
        if req.headers().contains_key(header::AUTHORIZATION)
            && !state.told_auth_off.swap(true, std::sync::atomic::Ordering::Relaxed)
        {
            tracing::warn!("a request carried an Authorization header, but this server has no token: authentication is off (start it with --token-file or RELAY_TOKEN to turn it on)");
        }
        return Ok(next.run(req).await);
    }
    let Some(given) = bearer(req.headers()) else {
        return Err(unauthorized("send `Authorization: Bearer <token>`"));
    };
    // Check every token, always, so the time taken says nothing about which
    // (or how much of one) matched.
    let mut ok = subtle::Choice::from(0u8);
    for t in tokens {
        ok |= given.as_bytes().ct_eq(t.as_bytes());
    }
    if bool::from(ok) {
        Ok(next.run(req).await)
    } else {
        Err(unauthorized("the token is not valid"))
    }
}

/// What keeps a web page the operator visits away from an API without
/// tokens (loopback only): a page that reaches it under another host name
/// (DNS rebinding) reads nothing, and one that posts to it (a plain HTML
/// form, `fetch` without CORS) changes nothing. A change must be sent as
/// `application/json`, which a browser sends cross-site only after a CORS
/// preflight that this server never grants, and not be marked cross-site
/// by `Origin` or `Sec-Fetch-Site`.
/// With `--insecure` (tokenless beyond loopback) only the host check is
/// off.
fn browser_guard(req: &Request, insecure: bool) -> Result<(), ApiError> {
    let h = req.headers();
    if !insecure && !crate::site::loopback_host(h) {
        return Err(forbidden(
            "this server has no token, so it answers only to a loopback name (http://127.0.0.1:<port> or http://localhost:<port>); start it with a token to reach it under another name",
        ));
    }
    if matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS) {
        return Ok(());
    }
    if crate::site::cross_site(h) {
        return Err(forbidden(
            "this request came from another site (Origin / Sec-Fetch-Site), so it was refused",
        ));
    }
    let json = h
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
    if !json && *req.method() != Method::DELETE {
        return Err(forbidden(
            "send changes with `Content-Type: application/json` (an empty body is fine): a server without tokens refuses others, which any web page could send",
        ));
    }
    Ok(())
}

fn forbidden(message: &str) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, ErrorCode::Forbidden, message)
}

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            // The scheme's name is case-insensitive (RFC 7235 2.1).
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then_some(token)
        })
        .map(str::trim)
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, ErrorCode::Unauthorized, message)
}

/// A new worker secret (`PUT /v1/workers/{id}`'s first answer): 32 random
/// bytes, hex.
pub(crate) fn worker_secret() -> Result<String, ApiError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            ErrorCode::Storage,
            format!("no randomness for a worker's secret: {e}; retry"),
        )
    })?;
    Ok(hex(&bytes))
}

/// The SHA-256 of `text`, hex: what the store keeps of a worker's secret
/// (a leaked row gives no secret, and comparing digests leaks nothing of
/// the secret through timing).
pub(crate) fn sha256_hex(text: &str) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(text.as_bytes()))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
