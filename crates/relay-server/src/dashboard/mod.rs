//! The dashboard: HTML pages at `/`, rendered on the server from the same
//! engine calls as the JSON API, on the same tokens.
//!
//! - Auth: with tokens, a login form takes one and sets a session cookie
//!   (`session`); a bearer header works too. Without tokens (loopback only,
//!   as the API) a session is handed out with the first page.
//! - Every state-changing request is a form POST that must carry the
//!   session's CSRF token, and is refused when its `Origin` or
//!   `Sec-Fetch-Site` says another site sent it.
//! - Pages are escaped by construction (maud), scripts and styles come from
//!   `/assets` only, and the Content-Security-Policy forbids anything
//!   inline.
//! - Assets are compiled into the binary: no network, no build step.

mod actions;
mod chart;
mod events;
mod filter;
mod jobs;
mod pages;
mod session;

pub(crate) use session::Keys;

use crate::AppState;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use axum::Router;
use maud::Markup;
use relay::Timestamp;
use session::Session;
use std::fmt::Write as _;
use std::sync::Arc;

type S = State<Arc<AppState>>;

const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

pub(crate) fn router(state: Arc<AppState>) -> Router<Arc<AppState>> {
    let pages = Router::new()
        .route("/", get(pages::overview))
        .route("/jobs", get(jobs::jobs))
        .route("/jobs/bulk", post(actions::bulk))
        .route("/jobs/{id}", get(pages::job))
        .route("/jobs/{id}/{action}", post(actions::job))
        .route("/dead", get(pages::dead))
        .route("/schedules", get(pages::schedules))
        .route("/workers", get(pages::workers))
        .route("/events", get(events::events))
        .route("/schedules/{name}/{action}", post(actions::schedule))
        .route("/queues/{queue}", get(queue_page))
        .route("/queues/{queue}/{action}", post(actions::queue))
        .route("/logout", post(actions::logout))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            crate::body::read_body,
        ))
        .route_layer(middleware::from_fn_with_state(Arc::clone(&state), require_session));
    let login = Router::new()
        .route("/login", get(pages::login_form).post(actions::login))
        .layer(middleware::from_fn_with_state(
            Arc::clone(&state),
            crate::body::read_login,
        ));
    Router::new()
        .merge(pages)
        .merge(login)
        .route("/assets/{file}", get(asset))
        .layer(middleware::from_fn(security_headers))
}

/// Who a dashboard request comes from.
#[derive(Debug, Clone)]
pub(crate) enum Visitor {
    /// A browser with a session cookie: its forms must carry the CSRF token.
    Session(Session),
    /// A client with a valid bearer token: not a browser's ambient
    /// credential, so no CSRF token is needed.
    Bearer,
}

impl Visitor {
    /// The CSRF token its forms carry.
    pub fn csrf(&self, keys: &Keys) -> String {
        match self {
            Self::Session(s) => keys.csrf(s),
            Self::Bearer => String::new(),
        }
    }
}

fn bearer_ok(state: &AppState, headers: &HeaderMap) -> bool {
    crate::auth::bearer(headers).is_some_and(|g| state.dash.login(g).is_some())
}

/// Lets a request in with a valid session or bearer token; otherwise a page
/// goes to the login form (or, without tokens, gets a new session) and a
/// POST is refused. Refuses cross-site POSTs whatever they carry.
async fn require_session(State(state): S, mut req: Request, next: Next) -> Response {
    if !state.dash.login_required && !state.config.insecure && !crate::site::loopback_host(req.headers()) {
        return forbidden(
            "This server has no token, so its dashboard answers only to a loopback name: open it at http://127.0.0.1:<port>/ or http://localhost:<port>/ (or start the server with a token).",
        );
    }
    let reading = matches!(*req.method(), Method::GET | Method::HEAD);
    if !reading && crate::site::cross_site(req.headers()) {
        return forbidden("This request came from another site, so it was refused. Use the dashboard's own buttons.");
    }
    let mut session = session::cookie(req.headers()).and_then(|c| state.dash.verify(c));
    if let Some(s) = &session {
        match state.relay.mark(&s.ended_mark()).await {
            Ok(None) => {}
            // Logged out (here or on another server on the store).
            Ok(Some(_)) => session = None,
            Err(e) => {
                return page_error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    &format!("Sessions cannot be checked now ({e}). Try again in a moment."),
                )
            }
        }
    }
    let (visitor, new_cookie) = match session {
        Some(s) => (Visitor::Session(s), None),
        None if bearer_ok(&state, req.headers()) => (Visitor::Bearer, None),
        None if !reading => {
            return forbidden("Your session has ended (or the server restarted): reload the page and try again.");
        }
        None if state.dash.login_required => {
            let next = req.uri().path_and_query().map_or("/", |p| p.as_str());
            return Redirect::to(&format!("/login?next={}", encode(next))).into_response();
        }
        None => {
            let s = state.dash.issue(0);
            let cookie = s.set_cookie(&state.dash);
            (Visitor::Session(s), Some(cookie))
        }
    };
    req.extensions_mut().insert(visitor);
    let mut res = next.run(req).await;
    if let Some(c) = new_cookie.and_then(|c| HeaderValue::from_str(&c).ok()) {
        res.headers_mut().append(header::SET_COOKIE, c);
    }
    res
}

/// The headers every dashboard answer carries.
async fn security_headers(req: Request, next: Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    res
}

fn forbidden(message: &str) -> Response {
    page_error(StatusCode::FORBIDDEN, message)
}

/// An error as a page of its own.
pub(crate) fn page_error(status: StatusCode, message: &str) -> Response {
    (status, pages::error_page(status, message)).into_response()
}

/// An engine error as a page.
pub(crate) struct PageError(crate::ApiError);

impl From<relay::Error> for PageError {
    fn from(e: relay::Error) -> Self {
        Self(e.into())
    }
}

impl From<crate::ApiError> for PageError {
    fn from(e: crate::ApiError) -> Self {
        Self(e)
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        page_error(self.0.status, &self.0.message)
    }
}

pub(crate) type PageResult = Result<Markup, PageError>;

async fn queue_page(Path(queue): Path<String>) -> Response {
    Redirect::to(&format!("/jobs?queue={}", encode(&queue))).into_response()
}

const CSS: &str = include_str!("../../assets/dashboard.css");
const JS: &str = include_str!("../../assets/dashboard.js");
const ICON: &str = include_str!("../../assets/icon.svg");

async fn asset(Path(file): Path<String>) -> Response {
    let (body, kind) = match file.as_str() {
        "dashboard.css" => (CSS, "text/css; charset=utf-8"),
        "dashboard.js" => (JS, "text/javascript; charset=utf-8"),
        "icon.svg" => (ICON, "image/svg+xml"),
        _ => return page_error(StatusCode::NOT_FOUND, "No such file."),
    };
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "public, max-age=3600"),
        ],
        body,
    )
        .into_response()
}

/// Percent-encodes a query value or path segment.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// The time now, by the system clock.
fn now() -> Timestamp {
    relay::Clock::now(&relay::SystemClock)
}
