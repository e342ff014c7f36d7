//! The dashboard's form posts: each checks the CSRF token, acts through the
//! engine, and goes back to the page it came from with what it did
//! (`?done=retry&count=3`).

use super::filter::FilterForm;
use super::pages::local_path;
use super::{forbidden, page_error, session, Visitor, S};
use crate::AppState;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Extension, Form};
use relay::{JobFilter, JobId};
use serde::Deserialize;

/// A form's fields in order, repeats kept (`ids=1&ids=2`).
type Fields = Vec<(String, String)>;

fn field<'a>(f: &'a Fields, name: &str) -> Option<&'a str> {
    f.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
}

/// The refusal of a form whose CSRF token is not its session's (`None`:
/// the form may go on).
fn csrf_refusal(state: &AppState, v: &Visitor, given: Option<&str>) -> Option<Response> {
    match v {
        Visitor::Bearer => None,
        Visitor::Session(s) if state.dash.csrf_ok(s, given.unwrap_or("")) => None,
        Visitor::Session(_) => Some(forbidden(
            "This form's security token is missing or out of date: reload the page and try again.",
        )),
    }
}

/// `back` with the outcome of an action in its query (earlier outcomes
/// dropped).
fn back_with(back: Option<&str>, done: &str, count: u64, failed: u64) -> Response {
    let back = local_path(back);
    let (path, query) = back.split_once('?').unwrap_or((&back, ""));
    let mut kept: Vec<&str> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .filter(|p| !["done=", "count=", "failed="].iter().any(|k| p.starts_with(k)))
        .collect();
    let outcome = format!("done={done}&count={count}&failed={failed}");
    kept.push(&outcome);
    Redirect::to(&format!("{path}?{}", kept.join("&"))).into_response()
}

fn engine_error(e: relay::Error) -> Response {
    super::PageError::from(e).into_response()
}

fn unknown() -> Response {
    page_error(StatusCode::NOT_FOUND, "Unknown action: use the page's buttons.")
}

/// Back to the page the action came from, or its error as a page.
fn outcome(done: Result<(), relay::Error>, back: Option<&str>, action: &str) -> Response {
    match done {
        Ok(()) => back_with(back, action, 1, 0),
        Err(e) => engine_error(e),
    }
}

/// Retries, cancels or deletes the ticked jobs (`action=retry`), or every
/// job the filter matches (`action=retry-all`), a chunk per transaction.
pub(crate) async fn bulk(State(s): S, Extension(v): Extension<Visitor>, Form(f): Form<Fields>) -> Response {
    if let Some(r) = csrf_refusal(&s, &v, field(&f, "csrf")) {
        return r;
    }
    let action = field(&f, "action").unwrap_or("");
    let (verb, all) = match action.split_once('-') {
        Some((verb, "all")) => (verb, true),
        None => (action, false),
        Some(_) => ("", false),
    };
    if !matches!(verb, "retry" | "cancel" | "delete") {
        return page_error(StatusCode::BAD_REQUEST, "Unknown action: use the page's buttons.");
    }
    let back = field(&f, "back");
    if all {
        let form = FilterForm {
            queue: field(&f, "queue").unwrap_or("").into(),
            state: field(&f, "state").unwrap_or("").into(),
            kind: field(&f, "kind").unwrap_or("").into(),
            tag: field(&f, "tag").unwrap_or("").into(),
            since: field(&f, "since").unwrap_or("").into(),
            until: field(&f, "until").unwrap_or("").into(),
            error: field(&f, "error").unwrap_or("").into(),
        };
        let filter = match form.to_filter(50) {
            Ok(filter) => filter,
            Err(e) => return page_error(StatusCode::BAD_REQUEST, &e),
        };
        if filter == JobFilter::default() {
            return page_error(
                StatusCode::BAD_REQUEST,
                "Search first: an action on all that match needs at least one condition.",
            );
        }
        let done = match verb {
            "retry" => s.relay.retry_matching(&filter).await,
            "cancel" => s.relay.cancel_matching(&filter).await,
            _ => s.relay.delete_matching(&filter).await,
        };
        return match done {
            Ok(n) => back_with(back, verb, n, 0),
            Err(e) => engine_error(e),
        };
    }
    let mut ids = Vec::new();
    for (k, raw) in &f {
        if k == "ids" {
            match raw.parse::<i64>() {
                Ok(id) => ids.push(JobId(id)),
                Err(_) => return page_error(StatusCode::BAD_REQUEST, &format!("{raw:?} is not a job id.")),
            }
        }
    }
    if ids.is_empty() {
        return page_error(
            StatusCode::BAD_REQUEST,
            "No job was selected: tick the jobs first, or use the buttons for all that match.",
        );
    }
    let (mut count, mut failed) = (0, 0);
    for id in ids {
        let done = match verb {
            "retry" => s.relay.retry(id).await,
            "cancel" => s.relay.cancel(id).await,
            _ => s.relay.delete(id).await,
        };
        match done {
            Ok(()) => count += 1,
            Err(relay::Error::InvalidState { .. } | relay::Error::NotFound { .. }) => failed += 1,
            Err(e) => return engine_error(e),
        }
    }
    back_with(back, verb, count, failed)
}

#[derive(Deserialize)]
pub(crate) struct ActionForm {
    #[serde(default)]
    csrf: String,
    back: Option<String>,
}

/// Retries (keeping its steps, or from the start), cancels or deletes one
/// job.
pub(crate) async fn job(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Path((raw, action)): Path<(String, String)>,
    Form(f): Form<ActionForm>,
) -> Response {
    if let Some(r) = csrf_refusal(&s, &v, Some(&f.csrf)) {
        return r;
    }
    let id = match crate::parse::id(&raw) {
        Ok(id) => id,
        Err(e) => return page_error(e.status, &e.message),
    };
    let done = match action.as_str() {
        "retry" => s.relay.retry(id).await,
        // Its recorded steps forgotten: every step runs again.
        "retry-from-start" => s.relay.retry_from_start(id).await,
        "cancel" => s.relay.cancel(id).await,
        "delete" => s.relay.delete(id).await,
        _ => return unknown(),
    };
    outcome(done, f.back.as_deref(), &action)
}

/// Pauses or resumes a queue.
pub(crate) async fn queue(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Path((queue, action)): Path<(String, String)>,
    Form(f): Form<ActionForm>,
) -> Response {
    if let Some(r) = csrf_refusal(&s, &v, Some(&f.csrf)) {
        return r;
    }
    let done = match action.as_str() {
        "pause" => s.relay.pause(&queue).await,
        "resume" => s.relay.resume(&queue).await,
        _ => return unknown(),
    };
    outcome(done, f.back.as_deref(), &action)
}

/// Pauses or resumes a schedule.
pub(crate) async fn schedule(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Path((name, action)): Path<(String, String)>,
    Form(f): Form<ActionForm>,
) -> Response {
    if let Some(r) = csrf_refusal(&s, &v, Some(&f.csrf)) {
        return r;
    }
    let done = match action.as_str() {
        "pause" => s.relay.pause_schedule(&name).await.map(drop),
        "resume" => s.relay.resume_schedule(&name).await.map(drop),
        _ => return unknown(),
    };
    outcome(done, Some("/schedules"), &action)
}

#[derive(Deserialize)]
pub(crate) struct LoginForm {
    #[serde(default)]
    token: String,
    next: Option<String>,
}

/// Checks a token and starts a session signed with it.
pub(crate) async fn login(State(s): S, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    if crate::site::cross_site(&headers) {
        return forbidden("This request came from another site, so it was refused.");
    }
    let next = local_path(f.next.as_deref());
    if !s.dash.login_required {
        return Redirect::to(&next).into_response();
    }
    match s.dash.login(f.token.trim()) {
        Some(key) => {
            let cookie = s.dash.issue(key).set_cookie(&s.dash);
            ([(header::SET_COOKIE, cookie)], Redirect::to(&next)).into_response()
        }
        None => {
            tracing::info!("dashboard: a login with a token that is not valid");
            (
                StatusCode::UNAUTHORIZED,
                super::pages::login_page(&next, Some("That token is not valid.")),
            )
                .into_response()
        }
    }
}

/// Ends the browser's session.
pub(crate) async fn logout(State(s): S, Extension(v): Extension<Visitor>, Form(f): Form<ActionForm>) -> Response {
    if let Some(r) = csrf_refusal(&s, &v, Some(&f.csrf)) {
        return r;
    }
    // Ended here and on every server on the store, whoever still holds
    // the cookie: not only forgotten by this browser.
    if let Visitor::Session(session) = &v {
        if let Err(e) = s.relay.put_mark(&session.ended_mark(), "", session.left()).await {
            return page_error(
                StatusCode::SERVICE_UNAVAILABLE,
                &format!("The session could not be ended ({e}); it is still valid. Try again."),
            );
        }
    }
    (
        [(header::SET_COOKIE, session::clear_cookie(&s.dash))],
        Redirect::to(if s.dash.login_required { "/login" } else { "/" }),
    )
        .into_response()
}
