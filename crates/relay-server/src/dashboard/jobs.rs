//! The jobs page: search by queue, state, kind, tag, time and error text,
//! a page at a time below a cursor, and the bulk actions' form.

use super::encode;
use super::filter::{opt, FilterForm};
use super::pages::{csrf_field, hour_start, layout, notice, runs_at, state_badge, time, Done};
use super::{PageError, PageResult, Visitor, S};
use axum::extract::{Query, State};
use axum::Extension;
use maud::{html, Markup};
use relay::{Job, JobState};
use serde::Deserialize;
use std::fmt::Write as _;

#[derive(Deserialize)]
pub(crate) struct JobsQuery {
    #[serde(flatten)]
    filter: FilterForm,
    /// The cursor (a job id). A string: see [`Done`].
    before: Option<String>,
    #[serde(flatten)]
    done: Done,
}

const PAGE: u32 = 50;

pub(crate) async fn jobs(
    State(s): S,
    Extension(v): Extension<Visitor>,
    q: Result<Query<JobsQuery>, axum::extract::rejection::QueryRejection>,
) -> PageResult {
    let Query(q) = q.map_err(|e| crate::ApiError::bad_request(format!("bad query: {}", e.body_text())))?;
    let f = &q.filter;
    let before = match q.before.as_deref().filter(|b| !b.is_empty()) {
        Some(b) => Some(crate::parse::id(b)?),
        None => None,
    };
    let filter = f.to_filter(PAGE).map(|mut filter| {
        filter.before = before;
        filter
    });
    // Bounded in bytes too: the list shows no payload, but reads the jobs.
    let (page, problem) = match filter {
        Ok(filter) => match s.relay.list_page(&filter, relay::LIST_PAGE_BYTES).await {
            Ok(page) => (page, None),
            Err(relay::Error::InvalidInput(e)) => (relay::JobPage::default(), Some(e.to_string())),
            Err(e) => return Err(PageError::from(e)),
        },
        Err(e) => (relay::JobPage::default(), Some(e)),
    };
    let (jobs, next) = (page.jobs, page.next);
    let here = {
        let query = f.query();
        let mut here = format!("/jobs?{query}");
        if let Some(b) = before {
            let _ = write!(here, "{}before={}", if query.is_empty() { "" } else { "&" }, b.0);
        }
        here
    };
    let filtered = !f.query().is_empty();
    // A queue's own page: its last hour, beside its jobs.
    let history = match opt(&f.queue) {
        Some(queue) => {
            let since = hour_start();
            let rows = s.relay.throughput_of(since, Some(&*queue)).await?;
            Some(super::chart::chart(&rows, since))
        }
        None => None,
    };
    let body = html! {
        h1 { "Jobs" @if let Some(queue) = opt(&f.queue) { " in " code { (queue) } } }
        (notice(&q.done))
        @if let Some(chart) = history {
            section.queue-history {
                h2 { "This queue, last hour (per minute)" }
                (chart)
            }
        }
        form.search method="get" action="/jobs" {
            label { "Queue" input name="queue" value=(f.queue); }
            label { "State" select name="state" {
                option value="" { "any" }
                @for st in JobState::ALL {
                    option value=(st.as_str()) selected[f.state.eq_ignore_ascii_case(st.as_str())] { (st.as_str()) }
                }
            } }
            label { "Kind" input name="kind" value=(f.kind); }
            label { "Tag" input name="tag" value=(f.tag); }
            label { "Since" input name="since" value=(f.since) placeholder="1h or 2026-12-01T09:00:00Z"; }
            label { "Until" input name="until" value=(f.until) placeholder="10m or RFC 3339"; }
            label { "Error contains" input name="error" value=(f.error); }
            button type="submit" { "Search" }
            @if filtered { a.clear href="/jobs" { "Clear" } }
        }
        @if let Some(p) = &problem { p.error role="alert" { (p) } }
        form.bulk method="post" action="/jobs/bulk" {
            (csrf_field(&v, &s))
            (f.hidden())
            input type="hidden" name="back" value=(here);
            div.actions {
                span { "Selected: " }
                button type="submit" name="action" value="retry" { "Retry" }
                button type="submit" name="action" value="cancel" { "Cancel" }
                button.danger type="submit" name="action" value="delete" data-confirm="Delete the selected jobs?" { "Delete" }
                @if filtered {
                    span.all { "All that match: " }
                    button type="submit" name="action" value="retry-all" { "Retry all" }
                    button type="submit" name="action" value="cancel-all" { "Cancel all" }
                    button.danger type="submit" name="action" value="delete-all" data-confirm="Delete every job that matches?" { "Delete all" }
                }
            }
            @if jobs.is_empty() && problem.is_none() {
                p.empty { "No jobs match." }
            } @else {
                (jobs_table(&jobs, true))
            }
        }
        @if let Some(n) = next {
            p.pager {
                a rel="next" href={ "/jobs?" (f.query()) @if filtered { "&" } "before=" (n.0) } { "Older →" }
            }
        }
    };
    Ok(layout("Jobs", Some("Jobs"), Some((&v, &s)), body))
}

fn jobs_table(jobs: &[Job], select: bool) -> Markup {
    html! {
        table.jobs {
            thead { tr {
                @if select { th { input type="checkbox" data-select-all aria-label="Select all on this page"; } }
                th.num { "ID" } th { "Queue" } th { "Kind" } th { "State" } th { "Runs" } th { "Tags" }
                th.num { "Attempts" } th.num { "Progress" } th { "Created" } th { "Last error" }
            } }
            tbody {
                @for j in jobs {
                    tr data-job=(j.id.0) {
                        @if select { td { input type="checkbox" name="ids" value=(j.id.0) aria-label={ "Select job " (j.id.0) }; } }
                        td.num { a href={ "/jobs/" (j.id.0) } { (j.id.0) } }
                        td { (j.queue) }
                        td { (j.kind) }
                        td { (state_badge(j.state())) }
                        td.runs { @if j.state().is_pending() { (runs_at(j.status.ready_at)) } }
                        td { @for t in &j.tags { a.tag href={ "/jobs?tag=" (encode(t)) } { (t) } " " } }
                        td.num { (j.status.attempts) "/" (j.status.max_attempts) }
                        td.num.progress {
                            @if let Some(p) = j.progress.as_ref().filter(|p| p.is_current(&j.status)) {
                                (super::pages::percent(p.fraction))
                            }
                        }
                        td { (time(j.created_at)) }
                        td.err { @if let Some(e) = &j.status.last_error { (e.lines().next().unwrap_or("")) } }
                    }
                }
            }
        }
    }
}
