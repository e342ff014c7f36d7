//! Printing: short text for people, or one JSON object per line (`--json`).
//! Everything printed is one of the API's typed answers
//! (`relay_client::wire`), whether it came from the library or from a
//! server, so both print alike. `--json` prints an answer as serialized:
//! payloads and results (`JsonText`) exactly as stored.

use relay_client::wire::{self, JsonText, State};
use serde::Serialize;
use std::io::{IsTerminal, Write};

pub struct Out {
    json: bool,
    /// States in colour: stdout is a terminal and NO_COLOR is not set
    /// (https://no-color.org).
    colour: bool,
}

/// The ANSI colour of a state's name: green done, red failed, yellow
/// running, blue ready, magenta scheduled or retrying, cyan waiting, dim
/// cancelled.
fn state_colour(state: State) -> Option<&'static str> {
    match state {
        State::Succeeded => Some("32"),
        State::Dead => Some("31"),
        State::Leased => Some("33"),
        State::Ready => Some("34"),
        State::Scheduled | State::Retrying => Some("35"),
        State::Waiting => Some("36"),
        State::Cancelled => Some("2"),
        State::Other => None,
    }
}

/// An optional field as printed: `-` for none.
fn or_dash<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "-".to_owned(), |v| v.to_string())
}

/// `text` (valid JSON) without whitespace outside its strings: one line,
/// every token as it was.
fn compact_json(text: &str) -> String {
    let (mut in_string, mut escaped) = (false, false);
    text.chars()
        .filter(|&c| {
            if in_string {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '"' => in_string = false,
                    _ => {}
                }
                return true;
            }
            in_string = c == '"';
            !c.is_ascii_whitespace()
        })
        .collect()
}

/// A payload's (or result's) bytes as one line of text: a JSON text as it
/// is, without the space between tokens; bytes that are not JSON as
/// themselves when they are printable text, else `base64:...`; nothing for
/// none.
/// How much of a step's output `relay show` prints, in characters.
const STEP_OUTPUT_SHOWN: usize = 120;

fn bytes_text(json: Option<&JsonText>, base64: Option<&str>) -> String {
    use base64::Engine as _;
    match (json, base64) {
        (Some(text), _) if !text.is_null() => compact_json(text.get()),
        (_, Some(b)) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default();
            // Text as text (a shell command's `echo sent ...` result),
            // on one line: its final line break dropped, the others shown
            // as \n.
            match String::from_utf8(bytes) {
                Ok(t) if !t.chars().any(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t')) => t
                    .trim_end_matches(['\n', '\r'])
                    .replace('\r', "\\r")
                    .replace('\n', "\\n"),
                _ => format!("base64:{b}"),
            }
        }
        _ => String::new(),
    }
}

/// An RFC 3339 time of an answer.
fn relay_time(t: &str) -> Option<relay::Timestamp> {
    let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339).ok()?;
    i64::try_from(at.unix_timestamp_nanos() / 1_000_000)
        .ok()
        .map(relay::Timestamp::from_millis)
}

/// When a job runs, as a person reads it: "in 12 min (2026-12-03
/// 18:05:12 UTC)", "3 min ago (...)" (due, waiting for a worker). An
/// unreadable time as it is.
fn runs_at(t: &str, now: relay::Timestamp) -> String {
    match relay_time(t) {
        Some(at) => format!("{} ({})", at.relative_to(now), at.utc_text()),
        None => t.to_owned(),
    }
}

fn duration_text(ms: u64) -> String {
    humantime::format_duration(std::time::Duration::from_millis(ms)).to_string()
}

impl Out {
    pub fn new(json: bool) -> Self {
        let colour =
            !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Self { json, colour }
    }

    /// `text` (a state's name, maybe padded) in its state's colour when
    /// colour is on.
    fn state(&self, state: State, text: String) -> String {
        match state_colour(state).filter(|_| self.colour) {
            Some(c) => format!("\x1b[{c}m{text}\x1b[0m"),
            None => text,
        }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Writes one line, with every control character in it shown escaped
    /// (see [`printable`]); a closed pipe (`relay jobs | head`) is not an
    /// error.
    pub fn line(&self, s: &str) {
        self.trusted_line(&printable(s));
    }

    /// Writes one line as it is: for lines whose every piece from the
    /// store went through [`printable`] and which carry this program's
    /// own colours.
    fn trusted_line(&self, s: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{s}");
    }

    /// An answer as one line of JSON, as serialized (payloads as stored).
    fn json<T: Serialize>(&self, answer: &T) {
        match serde_json::to_string(answer) {
            Ok(text) => self.trusted_line(&json_printable(&text)),
            // Not expected of the API's types; said rather than dropped.
            Err(e) => eprintln!("relay: an answer that does not serialize: {e}"),
        }
    }

    /// The id on stdout (scripts read it); a note on stderr when the id is
    /// of a job found instead (`found`: why, e.g. "(unfinished) already
    /// holds this unique key").
    pub fn submitted(&self, s: &wire::Submitted, found: &str) {
        if self.json {
            return self.json(s);
        }
        self.line(&s.id.to_string());
        if s.existing {
            eprintln!("relay: job {} {found}: nothing new was submitted", s.id);
        }
    }

    pub fn leased(&self, l: &wire::LeasedJob) {
        if self.json {
            return self.json(l);
        }
        let payload = bytes_text(l.payload.as_ref(), l.payload_base64.as_deref());
        self.line(&format!("{}\t{}\t{}\t{}\t{payload}", l.id, l.token, l.kind, l.attempt));
    }

    /// The answer of a bulk action: "retried 12 jobs".
    pub fn bulk(&self, b: &wire::BulkDone) {
        if self.json {
            return self.json(b);
        }
        let done = match b.action {
            wire::BulkAction::Retry => "retried",
            wire::BulkAction::Cancel => "cancelled",
            wire::BulkAction::Delete => "deleted",
        };
        let n = b.count;
        self.line(&format!("{done} {n} job{}", if n == 1 { "" } else { "s" }));
    }

    /// What a call on one job did: its new state, when it is due again, its
    /// lease's new expiry, or that it was deleted.
    pub fn changed(&self, c: &wire::Changed) {
        if self.json {
            return self.json(c);
        }
        let id = c.id;
        let text = match (&c.lease_expires_at, c.deleted, c.state, &c.ready_at) {
            (Some(until), _, _, _) => format!("job {id} leased until {until}"),
            (None, true, _, _) => format!("job {id} deleted"),
            (None, false, Some(state @ (State::Ready | State::Scheduled | State::Retrying)), Some(at)) => {
                let now = relay::Clock::now(&relay::SystemClock);
                format!(
                    "job {id} {}, runs {}",
                    self.state(state, state.to_string()),
                    runs_at(at, now)
                )
            }
            (None, false, Some(state), _) => format!("job {id} {}", self.state(state, state.to_string())),
            (None, false, None, _) => format!("job {id} -"),
        };
        self.trusted_line(&text); // ids, times and a state: nothing a worker wrote
    }

    /// A call's answer (`relay call`): its JSON text, as answered,
    /// whatever the output mode.
    pub fn answer(&self, text: &str) {
        self.line(text);
    }

    /// One job, a field a line.
    pub fn job(&self, j: &wire::Job) {
        if self.json {
            return self.json(j);
        }
        let field = |key: &str, text: String| self.trusted_line(&format!("{key:<17}{}", printable(&text)));
        let bytes = |json, base64| match bytes_text(json, base64) {
            t if t.is_empty() => "-".to_owned(),
            t => t,
        };
        field("id", j.id.to_string());
        field("queue", j.queue.clone());
        field("kind", j.kind.clone());
        self.trusted_line(&format!("{:<17}{}", "state", self.state(j.state, j.state.to_string())));
        field("priority", j.priority.to_string());
        field("attempts", j.attempts.to_string());
        field("max_attempts", j.max_attempts.to_string());
        if matches!(j.state, State::Ready | State::Scheduled | State::Retrying) {
            let now = relay::Clock::now(&relay::SystemClock);
            let when = relay_time(&j.ready_at).map(|at| at.relative_to(now));
            field("ready_at", format!("{} ({})", j.ready_at, or_dash(when)));
        } else {
            field("ready_at", j.ready_at.clone());
        }
        field("created_at", j.created_at.clone());
        field("finished_at", or_dash(j.finished_at.as_ref()));
        field("unique_key", or_dash(j.unique_key.as_ref()));
        field("group", or_dash(j.group.as_ref()));
        field("lease_token", j.lease_token.to_string());
        field("lease_expires_at", or_dash(j.lease_expires_at.as_ref()));
        field("leased_by", or_dash(j.leased_by.as_ref()));
        field("last_error", or_dash(j.last_error.as_ref()));
        field("traceparent", or_dash(j.traceparent.as_ref()));
        field("payload", bytes(j.payload.as_ref(), j.payload_base64.as_deref()));
        field("result", bytes(j.result.as_ref(), j.result_base64.as_deref()));
        field("lease_for_ms", or_dash(j.lease_for_ms));
        field(
            "tags",
            if j.tags.is_empty() {
                "-".to_owned()
            } else {
                j.tags.join(",")
            },
        );
        field("timeout_ms", or_dash(j.timeout_ms));
        field("waiting_on", j.waiting_on.to_string());
        field(
            "progress",
            j.progress.as_ref().map_or_else(
                || "-".to_owned(),
                |p| {
                    let said = p.message.as_deref().map(|m| format!(" {m}")).unwrap_or_default();
                    format!("{}{said} (attempt {}, at {})", percent(p.fraction), p.attempt, p.at)
                },
            ),
        );
        if j.steps.is_empty() {
            field("steps", "-".to_owned());
        }
        for (i, st) in j.steps.iter().enumerate() {
            // Each step on a line: its name, attempt, time and size, and as
            // much of its output as fits (`relay show --json` has it whole).
            let mut out = bytes_text(st.output.as_ref(), st.output_base64.as_deref());
            if out.chars().count() > STEP_OUTPUT_SHOWN {
                out = out.chars().take(STEP_OUTPUT_SHOWN).collect::<String>() + "...";
            }
            let bytes = if st.bytes == 1 { "byte" } else { "bytes" };
            field(
                if i == 0 { "steps" } else { "" },
                format!(
                    "{} (attempt {}, at {}, {} {bytes}) {out}",
                    st.name, st.attempt, st.at, st.bytes
                ),
            );
        }
    }

    pub fn jobs(&self, jobs: &[wire::Job]) {
        if self.json {
            return jobs.iter().for_each(|j| self.json(j));
        }
        // The state arrives padded (and maybe coloured: escape codes take
        // no room on the screen, so the padding is done before them).
        let row = |c: [String; 9]| {
            // Every column but the state (coloured here) is the store's.
            let mut i = 0;
            let c = c.map(|t| {
                i += 1;
                if i == 4 {
                    t
                } else {
                    printable(&t).into_owned()
                }
            });
            format!(
                "{:>8}  {:<16} {:<20} {} {:>3} {:>8}  {:<24}  {:<35}  {}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7], c[8]
            )
        };
        self.trusted_line(&row([
            "ID",
            "QUEUE",
            "KIND",
            "STATE     ",
            "PRI",
            "ATTEMPTS",
            "CREATED",
            "RUNS",
            "PROGRESS",
        ]
        .map(str::to_owned)));
        let now = relay::Clock::now(&relay::SystemClock);
        for j in jobs {
            let runs = if matches!(j.state, State::Ready | State::Scheduled | State::Retrying) {
                runs_at(&j.ready_at, now)
            } else {
                "-".to_owned()
            };
            let state = self.state(j.state, format!("{:<10}", j.state.as_str()));
            self.trusted_line(&row([
                j.id.to_string(),
                j.queue.clone(),
                j.kind.clone(),
                state,
                j.priority.to_string(),
                format!("{}/{}", j.attempts, j.max_attempts),
                j.created_at.clone(),
                runs,
                // Of the latest lease only: an earlier run's is history.
                j.progress
                    .as_ref()
                    .filter(|p| p.token == j.lease_token)
                    .map_or_else(|| "-".to_owned(), |p| percent(p.fraction)),
            ]));
        }
    }

    pub fn events(&self, events: &[wire::Event]) {
        for e in events {
            if self.json {
                self.json(e);
            } else {
                self.line(&format!("{:>4}  {}  {:<10} {}", e.seq, e.at, e.kind, e.data));
            }
        }
    }

    /// A queue paused or resumed.
    /// What an emit did.
    pub fn emitted(&self, key: &str, e: &wire::Emitted) {
        if self.json {
            return self.json(e);
        }
        let jobs = if e.woken == 1 { "job" } else { "jobs" };
        if e.first {
            self.line(&format!("event {key} emitted: woke {} {jobs}", e.woken));
        } else {
            self.line(&format!("event {key} was emitted before: nothing changed"));
        }
    }

    pub fn queue(&self, q: &wire::QueuePaused) {
        if self.json {
            return self.json(q);
        }
        let what = if q.paused { "paused" } else { "resumed" };
        self.line(&format!("queue {} {what}", q.queue));
    }

    /// One schedule, as added, paused or resumed.
    pub fn schedule(&self, v: &wire::Schedule) {
        if self.json {
            return self.json(v);
        }
        let text = if v.paused {
            format!("schedule {} ({}) paused", v.name, when_text(v))
        } else {
            format!("schedule {} ({}): next tick at {}", v.name, when_text(v), v.next_at)
        };
        self.line(&text);
    }

    /// A schedule removed.
    pub fn schedule_removed(&self, v: &wire::ScheduleRemoved) {
        if self.json {
            return self.json(v);
        }
        self.line(&format!("schedule {} removed", v.name));
    }

    /// Every schedule, one line each.
    pub fn schedules(&self, all: &[wire::Schedule]) {
        if self.json {
            return all.iter().for_each(|v| self.json(v));
        }
        let row = |c: [String; 5]| format!("{:<24} {:<32} {:<26} {:<26} {}", c[0], c[1], c[2], c[3], c[4]);
        self.line(&row(
            ["NAME", "WHEN", "NEXT TICK", "LAST TICK", "JOB"].map(str::to_owned)
        ));
        for v in all {
            let next = if v.paused {
                "(paused)".to_owned()
            } else {
                v.next_at.clone()
            };
            let job = match &v.job.group {
                Some(g) => format!("{} {} (group {g})", v.job.queue, v.job.kind),
                None => format!("{} {}", v.job.queue, v.job.kind),
            };
            self.line(&row([
                v.name.clone(),
                when_text(v),
                next,
                or_dash(v.last_at.as_ref()),
                job,
            ]));
        }
    }

    /// A queue's limits, as set.
    pub fn limits(&self, v: &wire::QueueLimits) {
        if self.json {
            return self.json(v);
        }
        let text = limits_text(
            v.max_leased,
            v.max_leased_per_group,
            v.rate_limit.as_ref(),
            v.poison_after,
        );
        self.line(&format!(
            "queue {}: {}",
            v.queue,
            if text.is_empty() { "no limits" } else { &text }
        ));
    }

    /// A queue's retention: each final state's, marked when it is the
    /// default's.
    pub fn retention(&self, v: &wire::QueueRetention) {
        if self.json {
            return self.json(v);
        }
        let text = |k: &wire::Keep| match k {
            wire::Keep::Ms(ms) => duration_text(*ms),
            wire::Keep::Forever(_) => "forever".to_owned(),
        };
        let one = |name: &str, own: Option<wire::Keep>, effective: &wire::Keep| {
            let whose = if own.is_some() { "" } else { " (default)" };
            format!("{name} {}{whose}", text(effective))
        };
        self.line(&format!(
            "queue {} keeps: {}, {}, {}",
            v.queue,
            one("SUCCEEDED", v.own.succeeded, &v.effective.succeeded),
            one("DEAD", v.own.dead, &v.effective.dead),
            one("CANCELLED", v.own.cancelled, &v.effective.cancelled)
        ));
    }

    /// A page of the workers: a line each, then a line for each job it
    /// runs and each lease it left orphaned (the header on the `first`
    /// page).
    pub fn workers_page(&self, v: &wire::Workers, first: bool) {
        if self.json {
            return self.json(v);
        }
        if v.workers.is_empty() {
            if first {
                self.line("no workers seen in the last hour (workers register when they start: relay work, the runtimes, the clients' Workers)");
            }
            return;
        }
        let now = relay::Clock::now(&relay::SystemClock);
        let ago = |t: &str| {
            relay_time(t).map_or_else(
                || t.to_owned(),
                |at| {
                    let ms = now.as_millis().saturating_sub(at.as_millis());
                    format!(
                        "{} ago",
                        duration_text(u64::try_from(ms.max(0)).unwrap_or(0) / 1000 * 1000)
                    )
                },
            )
        };
        let until = |t: &str| {
            relay_time(t).map_or_else(
                || t.to_owned(),
                |at| {
                    let ms = at.as_millis() - now.as_millis();
                    if ms <= 0 {
                        "expires now".to_owned()
                    } else {
                        format!(
                            "expires in {}",
                            duration_text(u64::try_from(ms).unwrap_or(0) / 1000 * 1000)
                        )
                    }
                },
            )
        };
        if first {
            self.line(&format!(
                "{:<28} {:<8} {:<16} {:<16} {:>7} {:>5} {:>7}  {}",
                "WORKER", "STATE", "NAME", "HOST", "PID", "CONC", "RUNNING", "SEEN"
            ));
        }
        for w in &v.workers {
            let state = match w.state {
                wire::WorkerState::Alive => "alive",
                wire::WorkerState::Gone => "gone",
                wire::WorkerState::Stopped => "stopped",
            };
            self.line(&format!(
                "{:<28} {:<8} {:<16} {:<16} {:>7} {:>5} {:>7}  {}  [{}] {}",
                w.id,
                state,
                w.name,
                w.host,
                w.pid,
                w.concurrency,
                w.running.len(),
                ago(&w.seen_at),
                w.queues.join(", "),
                w.version
            ));
            if w.state != wire::WorkerState::Gone {
                for r in &w.running {
                    self.line(&format!(
                        "    runs job {} (lease {}) for {}",
                        r.id,
                        r.token,
                        ago(&r.since).trim_end_matches(" ago")
                    ));
                }
            }
            for o in &w.orphaned {
                self.line(&format!(
                    "    orphaned: job {} (lease {}), started {}; its lease {}",
                    o.id,
                    o.token,
                    ago(&o.since),
                    until(&o.expires_at)
                ));
            }
        }
    }

    /// What `relay prune` deleted.
    pub fn pruned(&self, deleted: u64, took: std::time::Duration) {
        if self.json {
            return self.json(&serde_json::json!({ "deleted": deleted, "took_ms": took.as_millis() }));
        }
        self.line(&format!(
            "deleted {deleted} {} in {}",
            if deleted == 1 {
                "finished job past its retention"
            } else {
                "finished jobs past their retention"
            },
            humantime::format_duration(std::time::Duration::from_millis(
                u64::try_from(took.as_millis()).unwrap_or(u64::MAX)
            ))
        ));
    }

    /// A page of stats: one JSON line per page, or its rows under one
    /// header (`header` on the first page).
    pub fn stats(&self, v: &wire::Stats, header: bool) {
        if self.json {
            return self.json(v);
        }
        // QUEUE, a count per state, OLDEST READY.
        let row = |name: &str, counts: &[String], last: &str| {
            let counts: Vec<String> = counts.iter().map(|c| format!("{c:>9}")).collect();
            format!("{name:<20} {}  {last}", counts.join(" "))
        };
        if header {
            let names = State::ALL.map(|s| s.as_str().to_owned());
            self.line(&row("QUEUE", &names, "OLDEST READY"));
        }
        for (q, st) in &v.queues {
            let age = st.oldest_ready_age_ms.map_or_else(|| "-".to_owned(), duration_text);
            let name = if st.paused { format!("{q} (paused)") } else { q.clone() };
            let n = |s: State| st.counts.get(s.as_str()).copied().unwrap_or(0).to_string();
            self.line(&row(&name, &State::ALL.map(n), &age));
            // Limits on a line of their own below the queue's, so that the
            // counts stay in their columns.
            let limits = limits_text(
                st.max_leased,
                st.max_leased_per_group,
                st.rate_limit.as_ref(),
                st.poison_after,
            );
            if !limits.is_empty() {
                self.line(&format!("  limits: {limits}"));
            }
        }
    }
}

/// "at most 5 leased, 100 leases per 1s, DEAD after 5 lease expiries"
/// (empty without limits).
fn limits_text(
    max_leased: Option<u32>,
    per_group: Option<u32>,
    rate: Option<&wire::Rate>,
    poison_after: Option<u32>,
) -> String {
    let mut parts = Vec::new();
    if let Some(n) = max_leased {
        parts.push(format!("at most {n} leased"));
    }
    if let Some(n) = per_group {
        parts.push(format!("at most {n} leased per group"));
    }
    if let Some(r) = rate {
        parts.push(format!("{} leases per {}", r.limit, duration_text(r.per_ms)));
    }
    match poison_after {
        Some(0) => parts.push("lease expiries never make a job DEAD".to_owned()),
        Some(n) => parts.push(format!("DEAD after {n} lease expiries")),
        None => {}
    }
    parts.join(", ")
}

/// "cron */5 * * * * Europe/Berlin" or "every 30s".
fn when_text(v: &wire::Schedule) -> String {
    match (&v.cron, v.every_ms) {
        (Some(expr), _) => match &v.tz {
            Some(tz) => format!("cron {expr} {tz}"),
            None => format!("cron {expr}"),
        },
        (None, Some(ms)) => format!("every {}", duration_text(ms)),
        (None, None) => "?".to_owned(),
    }
}

/// A progress fraction as a whole percentage ("25%"; 99% until done;
/// 0.29 is 29%, not the 28.999...% of its binary value).
fn percent(fraction: f64) -> String {
    format!("{:.0}%", (fraction * 100.0 + 1e-9).floor().max(0.0))
}

/// `text` with every control character (but the line break and the tab,
/// which move the cursor only forward and down) and every
/// character that reorders text on screen (bidirectional overrides)
/// written as an escape (`\u{1b}`): what a worker wrote (a progress
/// message, a nack's error, a payload) cannot clear, retitle or rewrite
/// an operator's terminal (issue 39, item 6).
pub(crate) fn printable(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c, out| out.extend(c.escape_unicode()))
}

/// JSON text with what [`printable`] escapes written as JSON escapes
/// (`\u202e`): serde_json escapes the C0 controls but writes DEL, the C1
/// controls and the bidirectional overrides as they are, and in JSON they
/// can only stand inside strings, where the escape means the same.
fn json_printable(text: &str) -> std::borrow::Cow<'_, str> {
    escaped(text, |c, out| {
        let mut units = [0u16; 2];
        for u in c.encode_utf16(&mut units) {
            out.push_str(&format!("\\u{u:04x}"));
        }
    })
}

/// Whether `c` can drive a terminal: a control character but the line
/// break and the tab, or a bidirectional override.
fn hostile(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

fn escaped(text: &str, escape: impl Fn(char, &mut String)) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(hostile) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if hostile(c) {
            escape(c, &mut out);
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}
