//! The dashboard's pages, rendered with maud (every value escaped).

use super::filter::FilterForm;
use super::{encode, now};
use super::{PageResult, Visitor, S};
use crate::AppState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::Extension;
use maud::{html, Markup, DOCTYPE};
use relay::{JobState, Timestamp};
use serde::Deserialize;
use std::fmt::Write as _;
use std::time::Duration;

/// The start of the chart's first minute: the hour up to this minute.
pub(super) fn hour_start() -> Timestamp {
    Timestamp::from_millis((now().as_millis().div_euclid(60_000) - 59) * 60_000)
}

/// The frame of every page.
pub(super) fn layout(title: &str, nav: Option<&str>, visitor: Option<(&Visitor, &AppState)>, body: Markup) -> Markup {
    let item = |href: &str, label: &str| {
        html! { a href=(href) aria-current=[(nav == Some(label)).then_some("page")] { (label) } }
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · Relay" }
                link rel="stylesheet" href="/assets/dashboard.css";
                link rel="icon" href="/assets/icon.svg" type="image/svg+xml";
                script src="/assets/dashboard.js" defer {}
            }
            body {
                header.top {
                    a.brand href="/" { img src="/assets/icon.svg" alt="" width="20" height="20"; " Relay" }
                    nav {
                        (item("/", "Overview"))
                        (item("/jobs", "Jobs"))
                        (item("/dead", "Dead"))
                        (item("/schedules", "Schedules"))
                        (item("/workers", "Workers"))
                        (item("/events", "Events"))
                    }
                    @if let Some((v, state)) = visitor {
                        @if state.dash.login_required {
                            form.logout method="post" action="/logout" {
                                (csrf_field(v, state))
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main { (body) }
            }
        }
    }
}

pub(super) fn csrf_field(v: &Visitor, state: &AppState) -> Markup {
    html! { input type="hidden" name="csrf" value=(v.csrf(&state.dash)); }
}

/// A small form that POSTs one action.
fn action_form(v: &Visitor, state: &AppState, action: &str, label: &str, class: &str, back: &str) -> Markup {
    html! {
        form.inline method="post" action=(action) data-confirm=[(class == "danger").then(|| format!("{label}?"))] {
            (csrf_field(v, state))
            input type="hidden" name="back" value=(back);
            button type="submit" class=[(!class.is_empty()).then_some(class)] { (label) }
        }
    }
}

pub(crate) fn error_page(status: StatusCode, message: &str) -> Markup {
    layout(
        status.canonical_reason().unwrap_or("Error"),
        None,
        None,
        html! {
            h1 { (status.as_u16()) " " (status.canonical_reason().unwrap_or("")) }
            p.error role="alert" { (message) }
            p { a href="/" { "Back to the overview" } }
        },
    )
}

/// A time, with its zone (every time the dashboard shows is UTC).
pub(super) fn time(t: Timestamp) -> Markup {
    let s = t.to_rfc3339();
    html! { time datetime=(s) { (s.replace('T', " ").trim_end_matches('Z')) " UTC" } }
}

/// When a job waiting to be leased runs, read at a glance: "in 12 min",
/// or "3 min ago" when it is due and waits for a worker; then the time
/// itself, in UTC.
pub(super) fn runs_at(t: Timestamp) -> Markup {
    let utc = t.utc_text();
    html! { time.runs datetime=(t.to_rfc3339()) title=(utc) { (t.relative_to(now())) " " small { "(" (utc) ")" } } }
}

fn age(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m {}s", s / 60, s % 60),
        3600..86400 => format!("{}h {}m", s / 3600, (s % 3600) / 60),
        _ => format!("{}d {}h", s / 86400, (s % 86400) / 3600),
    }
}

/// A progress fraction as a whole percentage ("25%"; 99% until done;
/// 0.29 is 29%, not the 28.999...% of its binary value).
pub(super) fn percent(fraction: f64) -> String {
    format!("{:.0}%", (fraction * 100.0 + 1e-9).floor().max(0.0))
}

pub(super) fn state_badge(s: JobState) -> Markup {
    html! { span class={ "badge s-" (s.as_str().to_lowercase()) } { (s.as_str()) } }
}

/// What an action reports back through its redirect (`?done=retry&count=3`).
/// (Strings: a flattened struct's numbers do not parse from a query.)
#[derive(Deserialize, Default)]
pub(crate) struct Done {
    done: Option<String>,
    count: Option<String>,
    failed: Option<String>,
}

pub(super) fn notice(d: &Done) -> Markup {
    let verb = match d.done.as_deref() {
        Some("retry") => "retried",
        Some("retry-from-start") => "retried from the start",
        Some("cancel") => "cancelled",
        Some("delete") => "deleted",
        Some("pause") => "paused",
        Some("resume") => "resumed",
        _ => return html! {},
    };
    let number = |v: &Option<String>| v.as_deref().and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
    let count = number(&d.count);
    html! {
        p.notice role="status" {
            @if matches!(d.done.as_deref(), Some("pause" | "resume")) { (verb[..1].to_uppercase()) (verb[1..]) "." }
            @else { (count) " job" @if count != 1 { "s" } " " (verb) "." }
            @if let Some(f) = Some(number(&d.failed)).filter(|f| *f > 0) {
                " " (f) " could not be (their state does not allow it)."
            }
        }
    }
}

// ---------------------------------------------------------------- overview

#[derive(Deserialize)]
pub(crate) struct OverviewQuery {
    #[serde(flatten)]
    done: Done,
    /// The queue table's page: queues named after this one.
    after: Option<String>,
}

/// Queues in the overview's table, a page at a time: the page's size stays
/// the same however many queues there are.
const QUEUES_PER_PAGE: u32 = 100;

pub(crate) async fn overview(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Query(q): Query<OverviewQuery>,
) -> PageResult {
    let after = q.after.filter(|a| !a.is_empty());
    let stats = s.relay.stats_page(after.as_deref(), QUEUES_PER_PAGE).await?;
    let all = s.relay.queue_totals().await?;
    let since = hour_start();
    let minutes = s.relay.throughput_of(since, None).await?;
    let store = s.relay.store_info();
    let totals = &all.counts;
    let here = match &after {
        Some(a) => format!("/?after={}", encode(a)),
        None => "/".to_owned(),
    };
    let body = html! {
        h1 { "Overview" }
        (notice(&q.done))
        p.store { "Store: " code { (store.location) } " · " (store.durability) }
        div #live data-live {
            section.totals aria-label="Jobs by state" {
                @for st in JobState::ALL {
                    a.total href={ "/jobs?state=" (st.as_str()) } data-state=(st.as_str()) {
                        span.n { (totals.get(&st).copied().unwrap_or(0)) }
                        (state_badge(st))
                    }
                }
            }
            section {
                h2 { "Throughput, last hour (per minute)" }
                (super::chart::chart(&minutes, since))
            }
            section {
                h2 { "Queues" }
                @if all.queues > u64::from(QUEUES_PER_PAGE) {
                    p.count { (all.queues) " queues, " (all.paused) " paused; "
                        @if let Some(a) = &after { "after " code { (a) } ", " }
                        (stats.queues.len()) " shown, by name." }
                }
                @if stats.queues.is_empty() {
                    @if after.is_some() {
                        p.empty { "No queues past this one." }
                    } @else {
                        p.empty { "No queues yet: submit a job and it appears here." }
                    }
                } @else {
                    table.queues {
                        thead { tr {
                            th { "Queue" }
                            @for st in JobState::ALL { th.num { (st.as_str()) } }
                            th { "Oldest ready" } th { "Limits" } th { "Status" } th {}
                        } }
                        tbody {
                            @for (name, qs) in &stats.queues {
                                tr data-queue=(name) {
                                    td { a href={ "/jobs?queue=" (encode(name)) } { (name) } }
                                    @for st in JobState::ALL {
                                        td.num data-state=(st.as_str()) { (qs.counts.get(&st).copied().unwrap_or(0)) }
                                    }
                                    td { @if let Some(a) = qs.oldest_ready_age { (age(a)) } @else { "–" } }
                                    td {
                                        @if let Some(m) = qs.limits.max_leased { "≤ " (m) " leased " }
                                        @if let Some(m) = qs.limits.max_leased_per_group { "≤ " (m) " leased a group " }
                                        @if let Some(r) = qs.limits.rate { (r.limit) " per " (age(r.per)) " " }
                                        @match qs.limits.poison_after {
                                            Some(0) => { "expiries never kill" }
                                            Some(n) => { "DEAD after " (n) " expiries" }
                                            None => {}
                                        }
                                        @if qs.limits == relay::QueueLimits::default() { "–" }
                                    }
                                    td.status { @if qs.paused { span.badge.paused { "PAUSED" } } @else { "running" } }
                                    td {
                                        @let path = format!("/queues/{}/", encode(name));
                                        @if qs.paused {
                                            (action_form(&v, &s, &format!("{path}resume"), "Resume", "", &here))
                                        } @else {
                                            (action_form(&v, &s, &format!("{path}pause"), "Pause", "", &here))
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
                @if let Some(n) = &stats.next {
                    p.pager {
                        a rel="next" href={ "/?after=" (encode(n)) } { "Next queues →" }
                    }
                }
            }
        }
    };
    Ok(layout("Overview", Some("Overview"), Some((&v, &s)), body))
}

// ---------------------------------------------------------------- one job

/// A JSON text laid out two spaces an indent, its tokens unchanged: keys
/// in their order, duplicates kept, numbers as written (what a
/// `serde_json::Value` would sort, collapse and round). `text` is valid
/// JSON.
fn indent_json(text: &str) -> String {
    let mut out = String::with_capacity(text.len() * 2);
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let newline = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if in_string {
            out.push(c);
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            ' ' | '\n' | '\r' | '\t' => {}
            '"' => {
                in_string = true;
                out.push(c);
            }
            '{' | '[' => {
                out.push(c);
                // An empty object or array stays on its line.
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                if matches!(chars.peek(), Some('}' | ']')) {
                    out.extend(chars.next());
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(c);
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            _ => out.push(c),
        }
    }
    out
}

/// A completion token's record (a `ctx.token` step: `{"token":
/// "<id>.<secret>", ...}`) without its secret, which completes the token:
/// the page shows the id only.
fn redact_token(v: &mut serde_json::Value) {
    let Some(obj) = v.as_object_mut() else { return };
    for field in ["token", "path"] {
        if let Some(serde_json::Value::String(t)) = obj.get_mut(field) {
            if let Some((head, secret)) = t.split_once('.') {
                if secret.len() >= 64 {
                    let tail = secret.get(64..).unwrap_or_default().to_owned();
                    *t = format!("{head}.(secret hidden){tail}");
                }
            }
        }
    }
}

/// A step's output on one line: its JSON compact, or text, or the start of
/// its bytes in hex, cut to 200 characters (a job holds up to 1,000 steps).
fn step_text(b: &[u8]) -> String {
    const SHOWN: usize = 200;
    let text = match serde_json::from_slice::<serde_json::Value>(b) {
        _ if b.is_empty() => "null".to_owned(),
        Ok(mut v) => {
            redact_token(&mut v);
            v.to_string()
        }
        Err(_) => match std::str::from_utf8(b) {
            Ok(t) if !t.chars().any(char::is_control) => t.to_owned(),
            _ => b
                .iter()
                .take(SHOWN / 3)
                .map(|x| format!("{x:02x} "))
                .collect::<String>()
                .trim_end()
                .to_owned(),
        },
    };
    if text.chars().count() > SHOWN {
        text.chars().take(SHOWN).collect::<String>() + "…"
    } else {
        text
    }
}

/// Bytes as pretty JSON when they are JSON, as text when they are text,
/// else their size and a hex dump with an ASCII column.
fn bytes_view(b: &[u8]) -> Markup {
    const SHOWN: usize = 64 * 1024;
    if b.is_empty() {
        return html! { p.empty { "(empty)" } };
    }
    if let Ok(raw) = serde_json::from_slice::<&serde_json::value::RawValue>(b) {
        let pretty = indent_json(raw.get());
        let cut = pretty.len() > SHOWN;
        let shown = if cut {
            &pretty[..pretty.floor_char_boundary_compat(SHOWN)]
        } else {
            &pretty[..]
        };
        return html! {
            pre.json { (shown) }
            @if cut { p.empty { "(" (b.len()) " bytes; the first " (SHOWN) " shown)" } }
        };
    }
    // Text (a shell command's `echo sent ...`) as text: UTF-8 whose only
    // control characters are line breaks and tabs.
    if let Ok(text) = std::str::from_utf8(b) {
        if !text.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) {
            let cut = text.len() > SHOWN;
            let shown = if cut {
                &text[..text.floor_char_boundary_compat(SHOWN)]
            } else {
                text
            };
            return html! {
                p { "Text, " (b.len()) " bytes:" }
                pre.text { (shown) }
                @if cut { p.empty { "(the first " (SHOWN) " bytes shown)" } }
            };
        }
    }
    html! {
        p { (b.len()) " bytes, neither JSON nor text:" }
        pre.hex { (hex_dump(b)) }
        @if b.len() > 4096 { p.empty { "(the first 4096 bytes shown)" } }
    }
}

/// A hex dump of the first 4,096 bytes: each line an offset, 16 bytes in
/// hex, and the same bytes as ASCII (`.` for what is not printable).
fn hex_dump(b: &[u8]) -> String {
    let mut hex = String::new();
    for (i, chunk) in b.chunks(16).take(256).enumerate() {
        let _ = write!(hex, "{:08x}  ", i * 16);
        for x in chunk {
            let _ = write!(hex, "{x:02x} ");
        }
        hex.extend(std::iter::repeat_n("   ", 16 - chunk.len()));
        hex.push_str(" |");
        hex.extend(chunk.iter().map(|&x| {
            if x.is_ascii_graphic() || x == b' ' {
                x as char
            } else {
                '.'
            }
        }));
        hex.push_str("|\n");
    }
    hex
}

trait FloorBoundary {
    fn floor_char_boundary_compat(&self, i: usize) -> usize;
}

impl FloorBoundary for str {
    fn floor_char_boundary_compat(&self, mut i: usize) -> usize {
        while i > 0 && !self.is_char_boundary(i) {
            i -= 1;
        }
        i
    }
}

/// Events on a job's page at a time: the page's size stays bounded
/// however long the job's log (50,000 events made a 20.6 MB page).
const EVENTS_PER_PAGE: u32 = 200;

#[derive(serde::Deserialize)]
pub(crate) struct JobQuery {
    #[serde(flatten)]
    done: Done,
    /// The timeline's page: events after this `seq` (a string: see
    /// [`Done`]).
    events_after: Option<String>,
}

/// What a WAITING job waits for, in words.
fn waiting_for(w: &relay::WaitingFor) -> Markup {
    use relay::WaitingFor as W;
    match w {
        W::Jobs { count } => html! { (count) " job" @if *count != 1 { "s" } " it depends on" },
        W::Join { job, step } => html! {
            "job " a href={ "/jobs/" (job.0) } { (job.0) } " to end (joined by step " code { (step) } ")"
        },
        W::Event { key, step, until } => html! {
            "event " code { (key) } " (step " code { (step) } "), until " (time(*until))
        },
        W::Token { id, step, until } => html! {
            "completion token " code { (id) } " (step " code { (step) } "), until " (time(*until))
        },
        W::Sleep { until } => html! { "its sleep to end at " (time(*until)) },
        _ => html! { "something this dashboard does not know" },
    }
}

pub(crate) async fn job(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Path(raw): Path<String>,
    Query(q): Query<JobQuery>,
) -> PageResult {
    let id = crate::parse::id(&raw)?;
    let job = s.relay.get(id).await?;
    let waiting = s.relay.waiting_for(id).await?;
    let after = match q.events_after.as_deref().filter(|a| !a.is_empty()) {
        Some(a) => a
            .parse::<i64>()
            .map_err(|_| crate::ApiError::bad_request(format!("events_after {a:?} is not an event's number")))?
            .max(0),
        None => 0,
    };
    let page = s.relay.events_page(id, after, EVENTS_PER_PAGE).await?;
    // The job's dependencies are in its first event, `submitted`.
    let first = if after == 0 {
        page.events.first().cloned()
    } else {
        s.relay.events_page(id, 0, 1).await?.events.into_iter().next()
    };
    let events = page.events;
    let parents: Vec<i64> = first
        .iter()
        .find(|e| e.kind == "submitted")
        .and_then(|e| e.data.get("depends_on"))
        .and_then(|d| d.as_array())
        .map(|a| a.iter().filter_map(serde_json::Value::as_i64).collect())
        .unwrap_or_default();
    let st = &job.status;
    let here = format!("/jobs/{}", id.0);
    let body = html! {
        h1 { "Job " (id.0) " " (state_badge(st.state)) }
        (notice(&q.done))
        div.actions {
            @if matches!(st.state, JobState::Dead | JobState::Cancelled) {
                (action_form(&v, &s, &format!("{here}/retry"), "Retry", "", &here))
                // A retry goes on after the last recorded step; this one
                // forgets them (relay retry --reset-steps).
                @if !job.steps.is_empty() {
                    (action_form(&v, &s, &format!("{here}/retry-from-start"), "Retry from the start", "", &here))
                }
            }
            @if !st.state.is_finished() {
                (action_form(&v, &s, &format!("{here}/cancel"), "Cancel", "", &here))
            }
            @if st.state != JobState::Leased {
                (action_form(&v, &s, &format!("{here}/delete"), "Delete", "danger", "/jobs"))
            }
        }
        dl.fields {
            dt { "Queue" } dd { a href={ "/jobs?queue=" (encode(&job.queue)) } { (job.queue) } }
            dt { "Kind" } dd.kind { (job.kind) }
            dt { "Priority" } dd { (job.priority.get()) }
            dt { "Attempts" } dd { (st.attempts) " of " (st.max_attempts) }
            dt { "Created" } dd { (time(job.created_at)) }
            @if st.state.is_pending() {
                dt { "Runs" } dd { (runs_at(st.ready_at)) }
            } @else {
                dt { "Ready at" } dd { (time(st.ready_at)) }
            }
            @if let Some(f) = st.finished_at { dt { "Finished" } dd { (time(f)) } }
            @if let Some(l) = &st.lease {
                dt { "Leased by" } dd { code { (l.worker) } " (token " (st.last_token.0) ")" }
                dt { "Lease expires" } dd { (time(l.expires_at)) }
            }
            @if let Some(w) = &waiting {
                dt { "Waiting for" } dd.waiting { (waiting_for(w)) }
            }
            @if let Some(k) = &job.unique_key { dt { "Unique key" } dd { code { (k) } } }
            @if let Some(g) = &job.group { dt { "Group" } dd { code { (g) } } }
            @if !job.tags.is_empty() {
                dt { "Tags" } dd { @for t in &job.tags { a.tag href={ "/jobs?tag=" (encode(t)) } { (t) } " " } }
            }
            @if !parents.is_empty() {
                dt { "Depends on" } dd {
                    @for p in &parents { a href={ "/jobs/" (p) } { (p) } " " }
                    @if st.waiting_on > 0 { "(waiting on " (st.waiting_on) ")" }
                }
            }
            @if let Some(t) = &job.traceparent { dt { "Trace" } dd { code { (t) } } }
            @if let Some(p) = &job.progress {
                // A SUCCEEDED job is done whatever its handler last said
                // (it may never have reported 100%).
                @let done = st.state == JobState::Succeeded;
                @let fraction = if done { 1.0 } else { p.fraction };
                dt { "Progress" } dd.progress {
                    progress value=(fraction) max="1" { (percent(fraction)) }
                    @if done { " done; last reported" }
                    " " (percent(p.fraction))
                    @if let Some(m) = &p.message { " " span.message { (m) } }
                    " (attempt " (p.attempt) ", " (time(p.at)) ")"
                }
            }
        }
        @if let Some(e) = &st.last_error {
            // An earlier attempt's error on a job that then succeeded is
            // history, not the job's state: said so, not in red.
            @if st.state == JobState::Succeeded {
                h2 { "Error of an earlier attempt" }
                pre.earlier-error { (e) }
            } @else {
                h2 { "Last error" }
                pre.error-text { (e) }
            }
        }
        h2 { "Payload" }
        (bytes_view(&job.payload))
        @if let Some(r) = &job.result {
            h2 { "Result" }
            (bytes_view(r))
        }
        @if !job.steps.is_empty() {
            h2 { "Steps" }
            table.steps {
                thead { tr { th { "Step" } th.num { "Attempt" } th { "Recorded" } th.num { "Bytes" } th { "Output" } } }
                tbody {
                    @for st in &job.steps {
                        tr {
                            td.kind { (st.name) }
                            td.num { (st.attempt) }
                            td { (time(st.at)) }
                            td.num { (st.output.len()) }
                            td { code { (step_text(&st.output)) } }
                        }
                    }
                }
            }
        }
        h2 { "Timeline" }
        @if after > 0 {
            p { "Events after #" (after) ". " a href={ (here) } { "← From the first" } }
        }
        table.events {
            thead { tr { th.num { "#" } th { "At" } th { "Event" } th { "Data" } } }
            tbody {
                @for e in &events {
                    tr {
                        td.num { (e.seq) }
                        td { (time(e.at)) }
                        td.kind { (e.kind) }
                        td { @if !e.data.is_null() { code { (e.data.to_string()) } } }
                    }
                }
            }
        }
        @if let Some(n) = page.next {
            p { a rel="next" href={ (here) "?events_after=" (n) } { "Next events →" } }
        }
    };
    Ok(layout(&format!("Job {}", id.0), Some("Jobs"), Some((&v, &s)), body))
}

// ---------------------------------------------------------------- dead

pub(crate) async fn dead(State(s): S, Extension(v): Extension<Visitor>, Query(q): Query<OverviewQuery>) -> PageResult {
    let groups = s.relay.dead_groups(200).await?;
    let dead: u64 = s
        .relay
        .queue_totals()
        .await?
        .counts
        .get(&JobState::Dead)
        .copied()
        .unwrap_or(0);
    // Groups are made of the newest DEAD jobs only: past that, a group's
    // count is a floor, and its button says so.
    let windowed = dead > u64::from(relay::DEAD_GROUP_WINDOW);
    let body = html! {
        h1 { "Dead jobs" }
        (notice(&q.done))
        div #live data-live {
            @if windowed {
                p.hint { "Grouped from the newest " (relay::DEAD_GROUP_WINDOW) " of " (dead) " dead jobs. "
                    "“Retry all” retries every dead job of the group, however old." }
            }
            @if groups.is_empty() {
                p.empty { "No dead jobs." }
            } @else {
                table.dead {
                    thead { tr { th { "Queue" } th { "Kind" } th { "Error" } th.num { "Jobs" } th { "Last died" } th {} } }
                    tbody {
                        @for g in &groups {
                            @let f = FilterForm {
                                queue: g.queue.clone(),
                                state: "DEAD".into(),
                                kind: g.kind.clone(),
                                error: g.error.clone(),
                                ..FilterForm::default()
                            };
                            tr data-kind=(g.kind) {
                                td { (g.queue) }
                                td.kind { (g.kind) }
                                td.err { a href={ "/jobs?" (f.query()) } { (g.error) } }
                                td.num { (g.count) }
                                td { a href={ "/jobs/" (g.newest.0) } { (time(g.last_at)) } }
                                td {
                                    form.inline method="post" action="/jobs/bulk" {
                                        (csrf_field(&v, &s))
                                        (f.hidden())
                                        input type="hidden" name="back" value="/dead";
                                        button type="submit" name="action" value="retry-all" {
                                            @if windowed { "Retry all" } @else { "Retry all " (g.count) }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Dead jobs", Some("Dead"), Some((&v, &s)), body))
}

// ---------------------------------------------------------------- schedules

pub(crate) async fn schedules(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Query(q): Query<OverviewQuery>,
) -> PageResult {
    let all = s.relay.schedules().await?;
    let body = html! {
        h1 { "Schedules" }
        (notice(&q.done))
        @if all.is_empty() {
            p.empty { "No schedules. Add one with " code { "relay schedule add" } " or " code { "PUT /v1/schedules/{name}" } "." }
        } @else {
            table.schedules {
                thead { tr { th { "Name" } th { "When" } th { "Job" } th { "Next" } th { "Last" } th { "Status" } th {} } }
                tbody {
                    @for sc in &all {
                        tr data-schedule=(sc.name) {
                            td { (sc.name) }
                            td { @match &sc.recurrence {
                                relay::Recurrence::Cron { expr, tz } => { code { (expr) } @if let Some(tz) = tz { " " (tz) } }
                                relay::Recurrence::Every(d) => { "every " (age(*d)) }
                            } }
                            td { (sc.queue) " / " (sc.kind) @if let Some(g) = &sc.group { br; small.group { "group " (g) } } }
                            td { (time(sc.next_at)) }
                            td { @if let Some(l) = sc.last_at { (time(l)) } @else { "–" } }
                            td.status { @if sc.paused { span.badge.paused { "PAUSED" } } @else { "active" } }
                            td {
                                @let path = format!("/schedules/{}/", encode(&sc.name));
                                @if sc.paused {
                                    (action_form(&v, &s, &format!("{path}resume"), "Resume", "", "/schedules"))
                                } @else {
                                    (action_form(&v, &s, &format!("{path}pause"), "Pause", "", "/schedules"))
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    Ok(layout("Schedules", Some("Schedules"), Some((&v, &s)), body))
}

/// Workers on the page at a time (by id): the page's size, and its reload
/// every 2 s, stay bounded however many workers there are (100,000 made a
/// 34 MB page).
const WORKERS_PER_PAGE: u32 = 200;

#[derive(Deserialize)]
pub(crate) struct WorkersQuery {
    /// Workers after this id.
    after: Option<String>,
}

/// The workers seen in the last hour, a page at a time by id: alive ones
/// first on the page, what each runs and for how long; a gone one's
/// orphaned leases and when they expire.
pub(crate) async fn workers(
    State(s): S,
    Extension(v): Extension<Visitor>,
    Query(q): Query<WorkersQuery>,
) -> PageResult {
    let after = q.after.filter(|a| !a.is_empty());
    let page = s.relay.workers_page(after.as_deref(), WORKERS_PER_PAGE).await?;
    let mut all = page.workers;
    let rank = |w: &relay::WorkerView| match w.state {
        relay::WorkerState::Alive => 0,
        relay::WorkerState::Gone => 1,
        relay::WorkerState::Stopped => 2,
    };
    all.sort_by(|a, b| {
        rank(a)
            .cmp(&rank(b))
            .then_with(|| a.record.beat.id.cmp(&b.record.beat.id))
    });
    let now = now();
    let between = |from: Timestamp, to: Timestamp| {
        age(Duration::from_millis(
            u64::try_from(to.as_millis() - from.as_millis()).unwrap_or(0),
        ))
    };
    let since = |t: Timestamp| between(t, now);
    let alive = all.iter().filter(|w| w.state == relay::WorkerState::Alive).count();
    let body = html! {
        h1 { "Workers" }
        div #live data-live {
            @if all.is_empty() {
                p.empty { "No workers seen in the last hour. Workers register when they start: "
                    code { "relay work" } ", the Rust runtime, and the Python and TypeScript Workers." }
            } @else {
                p.hint {
                    (alive) " alive of " (all.len()) " seen in the last hour"
                    @if after.is_some() || page.next.is_some() { " on this page (by id)" }
                    ". A worker is gone when three of its heartbeats have not come; its leases are orphaned until they expire."
                }
                table.workers {
                    thead { tr { th { "Worker" } th { "State" } th { "Host" } th.num { "PID" } th { "Queues" } th.num { "Slots" }
                        th { "Running" } th { "Seen" } th { "Up" } th { "Version" } } }
                    tbody {
                        @for w in &all {
                            @let b = &w.record.beat;
                            tr data-worker=(b.id) data-state=(w.state.as_str()) {
                                td { span.name { (b.name) } br; small { (b.id) } }
                                td.status { span class={ "badge " (w.state.as_str()) } { (w.state.as_str().to_uppercase()) } }
                                td { (b.host) }
                                td.num { (b.pid) }
                                td { (b.queues.join(", ")) }
                                td.num.slots { (b.running.len()) " / " (b.concurrency) }
                                td.running {
                                    @if w.state == relay::WorkerState::Gone {
                                        @for o in &w.orphaned {
                                            div.orphaned data-job=(o.running.job.0) {
                                                "orphaned: " a href={ "/jobs/" (o.running.job.0) } { "job " (o.running.job.0) }
                                                " (lease expires " (time(o.expires_at)) ")"
                                            }
                                        }
                                        @if w.orphaned.is_empty() { "–" }
                                    } @else {
                                        @for r in &b.running {
                                            div data-job=(r.job.0) {
                                                a href={ "/jobs/" (r.job.0) } { "job " (r.job.0) } " for " (since(r.since))
                                            }
                                        }
                                        @if b.running.is_empty() { "idle" }
                                    }
                                }
                                td { (since(w.record.seen_at)) " ago" }
                                // A stopped or gone worker was up until
                                // it stopped or was last seen, not now.
                                td.up { @match (w.state, w.record.stopped_at) {
                                    (relay::WorkerState::Alive, _) => { (since(b.started_at)) }
                                    (_, Some(stopped)) => { (between(b.started_at, stopped)) }
                                    (_, None) => { (between(b.started_at, w.record.seen_at)) }
                                } }
                                td { small { (b.version) } }
                            }
                        }
                    }
                }
            }
            @if after.is_some() {
                p { a href="/workers" { "← From the first" } }
            }
            @if let Some(n) = &page.next {
                p { a rel="next" href={ "/workers?after=" (encode(n)) } { "Next workers →" } }
            }
        }
    };
    Ok(layout("Workers", Some("Workers"), Some((&v, &s)), body))
}

// ---------------------------------------------------------------- login

#[derive(Deserialize)]
pub(crate) struct LoginQuery {
    next: Option<String>,
}

pub(crate) fn login_page(next: &str, problem: Option<&str>) -> Markup {
    layout(
        "Log in",
        None,
        None,
        html! {
            h1 { "Log in" }
            @if let Some(p) = problem { p.error role="alert" { (p) } }
            form.login method="post" action="/login" {
                input type="hidden" name="next" value=(next);
                label { "Token" input type="password" name="token" autocomplete="current-password" required autofocus; }
                button type="submit" { "Log in" }
            }
            p.hint { "Use one of the server's tokens (its --token-file or RELAY_TOKEN)." }
        },
    )
}

pub(crate) async fn login_form(State(s): S, Query(q): Query<LoginQuery>) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !s.dash.login_required {
        return axum::response::Redirect::to("/").into_response();
    }
    login_page(&local_path(q.next.as_deref()), None).into_response()
}

/// Where to go after a login or an action: a path on this server, never
/// another site (`//evil.example`, `https://...`, `/\\evil.example` and
/// `/<tab>/evil.example`, which a browser reads as `//evil.example`, become
/// `/`). Only printable ASCII without spaces: anything else a browser might
/// strip or reinterpret.
pub(crate) fn local_path(p: Option<&str>) -> String {
    match p {
        Some(p)
            if p.starts_with('/')
                && !p.starts_with("//")
                && !p.contains('\\')
                && p.bytes().all(|b| b.is_ascii_graphic()) =>
        {
            p.to_owned()
        }
        _ => "/".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    /// The dashboard showed payloads through a `serde_json::Value`: keys
    /// sorted, duplicates collapsed, numbers rounded (issue 24, item 5).
    #[test]
    fn indenting_keeps_every_token() {
        let text = r#"{"b":1,"a":12345678901234567890123,"c":1E2,"s":"x, \"y\":[z]","e":[],"o":{ },"f":{"x":1,"x":2}}"#;
        let pretty = super::indent_json(text);
        assert_eq!(
            pretty,
            "{\n  \"b\": 1,\n  \"a\": 12345678901234567890123,\n  \"c\": 1E2,\n  \"s\": \"x, \\\"y\\\":[z]\",\n  \"e\": [],\n  \"o\": {},\n  \"f\": {\n    \"x\": 1,\n    \"x\": 2\n  }\n}"
        );
        let squeezed: String = pretty.lines().map(str::trim).collect::<String>().replace(": ", ":");
        assert_eq!(squeezed, text.replace("{ }", "{}"));
        assert_eq!(super::indent_json("1e999"), "1e999");
    }
}
