//! Bearer-token auth, compared in constant time against every token.

use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;
use subtle::ConstantTimeEq;

pub(crate) async fn require_token(
    State(state): State<Arc<AppState>>,
    req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let tokens = &state.config.tokens;
    if tokens.is_empty() {
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

/// The token of an `Authorization: Bearer <token>` header.
pub(crate) fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
}

fn unauthorized(message: &str) -> ApiError {
    ApiError::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
}
