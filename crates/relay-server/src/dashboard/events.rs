//! The Events page (issue 40): the event and token keys WAITING jobs wait
//! for now, the latest events kept, and the completion tokens not
//! completed yet. Each list is a bounded page read along an index, so the
//! page costs the same beside 100,000 waiting jobs or kept events.

use super::encode;
use super::pages::{layout, time};
use super::{PageResult, Visitor, S};
use axum::extract::{Query, State};
use axum::Extension;
use maud::html;
use serde::Deserialize;

/// Rows of each list on the page.
const ROWS: u32 = 50;

#[derive(Deserialize)]
pub(crate) struct EventsQuery {
    /// The awaited keys' page: keys after this one.
    after: Option<String>,
}

pub(crate) async fn events(State(s): S, Extension(v): Extension<Visitor>, Query(q): Query<EventsQuery>) -> PageResult {
    let after = q.after.filter(|a| !a.is_empty());
    let awaited = s.relay.awaited_keys(after.as_deref(), ROWS).await?;
    let recent = s.relay.recent_events(ROWS).await?;
    let tokens = s.relay.open_tokens(ROWS).await?;
    let body = html! {
        h1 { "Events" }
        section {
            h2 { "Waited for" }
            p.help { "Events and completion tokens WAITING jobs wait for now, by key. An emit of the key (or the token's completion) wakes them all in its commit." }
            @if awaited.is_empty() {
                p.empty {
                    @if after.is_some() { "No keys past this one." }
                    @else { "No job waits for an event or a token." }
                }
            } @else {
                table.awaited {
                    thead { tr { th { "Key" } th.num { "Jobs waiting" } th { "First" } th { "Soonest timeout" } } }
                    tbody {
                        @for k in &awaited {
                            tr data-key=(k.key) {
                                td { @match k.key.strip_prefix("token:") {
                                    Some(id) => { "token " code { (id) } }
                                    None => { code { (k.key) } }
                                } }
                                td.num { (k.waiters) }
                                td { a href={ "/jobs/" (k.first.0) } { (k.first.0) } }
                                td { (time(k.until)) }
                            }
                        }
                    }
                }
                @if awaited.len() == ROWS as usize {
                    @if let Some(last) = awaited.last() {
                        p.pager { a rel="next" href={ "/events?after=" (encode(&last.key)) } { "Next keys →" } }
                    }
                }
            }
        }
        section {
            h2 { "Recent events" }
            p.help { "The latest emits, kept a week: a wait that begins meanwhile returns the payload at once." }
            @if recent.is_empty() {
                p.empty { "No event kept. Emit one with " code { "relay emit KEY" } " or " code { "POST /v1/events/{key}" } "." }
            } @else {
                table.recent {
                    thead { tr { th { "Key" } th { "Payload" } th { "Kept until" } } }
                    tbody {
                        @for e in &recent {
                            tr data-key=(e.key) {
                                td { code { (e.key) } }
                                td.payload {
                                    @if !e.json && !e.preview.is_empty() { small { "base64 " } }
                                    code { (e.preview) @if e.cut { "…" } }
                                    @if e.preview.is_empty() { small { "(none)" } }
                                }
                                td { (time(e.kept_until)) }
                            }
                        }
                    }
                }
            }
        }
        section {
            h2 { "Open completion tokens" }
            p.help { "Tokens made by handlers (ctx.token) that nobody has completed yet, the latest deadline first. Their secrets are not kept: only the holder of a token's text can complete it." }
            @if tokens.is_empty() {
                p.empty { "No open token." }
            } @else {
                table.tokens {
                    thead { tr { th { "Token" } th { "Job" } th { "Expires" } } }
                    tbody {
                        @for t in &tokens {
                            tr data-token=(t.id) {
                                td { code { (t.id) } }
                                td { a href={ "/jobs/" (t.job.0) } { (t.job.0) } }
                                td { (time(t.expires_at)) }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Events", Some("Events"), Some((&v, &s)), body))
}
