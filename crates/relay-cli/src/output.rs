//! Printing: short text for people, or one JSON object per line (`--json`).
//! Everything printed is one of the API's answers (`relay_client::wire`,
//! built by `relay::wire` for a database file), whether it came from the
//! library or from a server, so both print alike.

use serde_json::Value;
use std::io::{IsTerminal, Write};

pub struct Out {
    json: bool,
    /// States in colour: stdout is a terminal and NO_COLOR is not set
    /// (https://no-color.org).
    colour: bool,
}

/// The ANSI colour of a state's name: green done, red failed, yellow
/// running, cyan waiting, dim cancelled.
fn state_colour(state: &str) -> Option<&'static str> {
    match state {
        "SUCCEEDED" => Some("32"),
        "DEAD" => Some("31"),
        "LEASED" => Some("33"),
        "READY" => Some("34"),
        "WAITING" => Some("36"),
        "CANCELLED" => Some("2"),
        _ => None,
    }
}

fn s(v: &Value) -> String {
    match v {
        Value::Null => "-".to_owned(),
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// An answer that carries payloads (a job, a leased job, a schedule), as
/// printed: `text` is its JSON exactly as answered (`--json` prints it, so
/// a payload's keys, duplicates and numbers stay as stored); `value` is
/// the same parsed for the text views, with each `payload` and `result`
/// kept as its JSON text (a string), since a `Value` would reorder it or
/// could not hold it (`1e999`, deep nesting).
pub struct Doc {
    text: String,
    value: Value,
}

impl Doc {
    /// An answer serialized to its JSON text.
    ///
    /// # Errors
    ///
    /// The serializer's message (not expected for the API's types).
    pub fn of<T: serde::Serialize>(answer: &T) -> Result<Self, String> {
        let text = serde_json::to_string(answer).map_err(|e| format!("an answer that does not serialize: {e}"))?;
        let value = with_bytes_as_text(&text).map_err(|e| format!("an answer that does not parse: {e}"))?;
        Ok(Self { text, value })
    }

    pub fn value(&self) -> &Value {
        &self.value
    }
}

/// `text` (a JSON object) parsed, `payload` and `result` (in it and in its
/// `job`) as their JSON text.
fn with_bytes_as_text(text: &str) -> serde_json::Result<Value> {
    use serde_json::value::RawValue;
    let fields: std::collections::BTreeMap<String, &RawValue> = serde_json::from_str(text)?;
    let mut m = serde_json::Map::new();
    for (k, raw) in fields {
        let v = match k.as_str() {
            "payload" | "result" if raw.get() != "null" => Value::String(raw.get().to_owned()),
            "job" if raw.get() != "null" => with_bytes_as_text(raw.get())?,
            _ => serde_json::from_str(raw.get())?,
        };
        m.insert(k, v);
    }
    Ok(Value::Object(m))
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
/// is (a [`Doc`] keeps it as a string) without the space between tokens, bytes that are not JSON as
/// themselves when they are printable text, else `base64:...`; nothing for
/// none.
fn bytes_text(v: &Value, name: &str) -> String {
    use base64::Engine as _;
    match (&v[name], &v[format!("{name}_base64").as_str()]) {
        (Value::String(text), _) => compact_json(text),
        (Value::Null, Value::String(b)) => {
            let bytes = base64::engine::general_purpose::STANDARD.decode(b).unwrap_or_default();
            match String::from_utf8(bytes) {
                Ok(t) if !t.chars().any(char::is_control) => t,
                _ => format!("base64:{b}"),
            }
        }
        (Value::Null, _) => String::new(),
        (json, _) => json.to_string(),
    }
}

impl Out {
    pub fn new(json: bool) -> Self {
        let colour =
            !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Self { json, colour }
    }

    /// `text` (a state's name, maybe padded) in its state's colour when
    /// colour is on.
    fn state(&self, state: &str, text: String) -> String {
        match state_colour(state).filter(|_| self.colour) {
            Some(c) => format!("\x1b[{c}m{text}\x1b[0m"),
            None => text,
        }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Writes one line; a closed pipe (`relay jobs | head`) is not an error.
    pub fn line(&self, s: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{s}");
    }

    fn value(&self, v: &Value) {
        self.line(&v.to_string());
    }

    /// The id on stdout (scripts read it); a note on stderr when the id is
    /// of an unfinished job that already held the unique key, or of the
    /// first submit of the idempotency key (`keyed`).
    pub fn submitted(&self, v: &Value, keyed: bool) {
        if self.json {
            self.value(v);
        } else {
            self.line(&s(&v["id"]));
            if v["existing"] == true {
                let what = if keyed {
                    "was submitted with this idempotency key (or holds its unique key)"
                } else {
                    "(unfinished) already holds this unique key"
                };
                eprintln!("relay: job {} {what}: nothing new was submitted", s(&v["id"]));
            }
        }
    }

    pub fn leased(&self, doc: &Doc) {
        if self.json {
            return self.line(&doc.text);
        }
        let l = doc.value();
        let payload = bytes_text(l, "payload");
        self.line(&format!(
            "{}\t{}\t{}\t{}\t{payload}",
            s(&l["id"]),
            s(&l["token"]),
            s(&l["kind"]),
            s(&l["attempt"])
        ));
    }

    /// `{"id", "state", "ready_at"?}`, `{"id", "lease_expires_at"}` or
    /// `{"id", "deleted"}`.
    /// The answer of a bulk action: "retried 12 jobs".
    pub fn bulk(&self, v: &Value) {
        if self.json {
            return self.value(v);
        }
        let done = match v["action"].as_str().unwrap_or_default() {
            "retry" => "retried",
            "cancel" => "cancelled",
            "delete" => "deleted",
            other => other,
        };
        let n = v["count"].as_u64().unwrap_or(0);
        self.line(&format!("{done} {n} job{}", if n == 1 { "" } else { "s" }));
    }

    pub fn changed(&self, v: &Value) {
        if self.json {
            return self.value(v);
        }
        let id = s(&v["id"]);
        let text = if let Some(until) = v.get("lease_expires_at") {
            format!("job {id} leased until {}", s(until))
        } else if v.get("deleted").is_some() {
            format!("job {id} deleted")
        } else if let Some(at) = v.get("ready_at").filter(|_| v["state"] == "READY") {
            format!("job {id} {} again at {}", self.state("READY", s(&v["state"])), s(at))
        } else {
            let state = s(&v["state"]);
            format!("job {id} {}", self.state(&state, state.clone()))
        };
        self.line(&text);
    }

    /// A call's answer (`relay call`): its JSON text, as answered,
    /// whatever the output mode.
    pub fn answer(&self, text: &str) {
        self.line(text);
    }

    pub fn job(&self, doc: &Doc) {
        if self.json {
            return self.line(&doc.text);
        }
        let j = doc.value();
        let Some(obj) = j.as_object() else { return };
        for key in JOB_KEYS
            .iter()
            .copied()
            .chain(obj.keys().map(String::as_str).filter(|k| !JOB_KEYS.contains(k)))
        {
            // Bytes as text (see `bytes_text`), under their own name.
            if matches!(key, "payload" | "result") {
                let text = bytes_text(j, key);
                self.line(&format!("{key:<17}{}", if text.is_empty() { "-" } else { &text }));
            } else if !matches!(key, "payload_base64" | "result_base64") {
                if let Some(val) = obj.get(key) {
                    let text = s(val);
                    let text = if key == "state" {
                        self.state(&text, text.clone())
                    } else {
                        text
                    };
                    self.line(&format!("{key:<17}{text}"));
                }
            }
        }
    }

    pub fn jobs(&self, jobs: &[Doc]) {
        if self.json {
            return jobs.iter().for_each(|j| self.line(&j.text));
        }
        // The state arrives padded (and maybe coloured: escape codes take
        // no room on the screen, so the padding is done before them).
        let row = |c: [String; 7]| {
            format!(
                "{:>8}  {:<16} {:<20} {} {:>3} {:>8}  {}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6]
            )
        };
        self.line(&row([
            "ID",
            "QUEUE",
            "KIND",
            "STATE     ",
            "PRI",
            "ATTEMPTS",
            "CREATED",
        ]
        .map(str::to_owned)));
        for j in jobs.iter().map(Doc::value) {
            let attempts = format!("{}/{}", s(&j["attempts"]), s(&j["max_attempts"]));
            let state = s(&j["state"]);
            self.line(&row([
                s(&j["id"]),
                s(&j["queue"]),
                s(&j["kind"]),
                self.state(&state, format!("{state:<10}")),
                s(&j["priority"]),
                attempts,
                s(&j["created_at"]),
            ]));
        }
    }

    pub fn events(&self, events: &[Value]) {
        for e in events {
            if self.json {
                self.value(e);
            } else {
                self.line(&format!(
                    "{:>4}  {}  {:<10} {}",
                    s(&e["seq"]),
                    s(&e["at"]),
                    s(&e["kind"]),
                    e["data"]
                ));
            }
        }
    }

    /// A queue paused or resumed.
    pub fn queue(&self, v: &Value) {
        if self.json {
            return self.value(v);
        }
        let what = if v["paused"] == true { "paused" } else { "resumed" };
        self.line(&format!("queue {} {what}", s(&v["queue"])));
    }

    /// One schedule, as added, paused, resumed or removed.
    pub fn schedule(&self, doc: &Doc) {
        if self.json {
            return self.line(&doc.text);
        }
        let v = doc.value();
        let name = s(&v["name"]);
        let text = if v["deleted"] == true {
            format!("schedule {name} removed")
        } else if v["paused"] == true {
            format!("schedule {name} ({}) paused", when_text(v))
        } else {
            format!("schedule {name} ({}): next tick at {}", when_text(v), s(&v["next_at"]))
        };
        self.line(&text);
    }

    /// Every schedule, one line each.
    pub fn schedules(&self, all: &[Doc]) {
        if self.json {
            return all.iter().for_each(|v| self.line(&v.text));
        }
        let row = |c: [String; 5]| format!("{:<24} {:<32} {:<26} {:<26} {}", c[0], c[1], c[2], c[3], c[4]);
        self.line(&row(
            ["NAME", "WHEN", "NEXT TICK", "LAST TICK", "JOB"].map(str::to_owned)
        ));
        for v in all.iter().map(Doc::value) {
            let next = if v["paused"] == true {
                "(paused)".to_owned()
            } else {
                s(&v["next_at"])
            };
            let last = v["last_at"].as_str().unwrap_or("-").to_owned();
            let job = format!("{} {}", s(&v["job"]["queue"]), s(&v["job"]["kind"]));
            self.line(&row([s(&v["name"]), when_text(v), next, last, job]));
        }
    }

    /// A queue's limits, as set.
    pub fn limits(&self, v: &Value) {
        if self.json {
            return self.value(v);
        }
        let text = limits_text(v);
        self.line(&format!(
            "queue {}: {}",
            s(&v["queue"]),
            if text.is_empty() { "no limits" } else { &text }
        ));
    }

    /// A page of stats: one JSON line per page, or its rows under one
    /// header (`header` on the first page).
    pub fn stats(&self, v: &Value, header: bool) {
        if self.json {
            return self.value(v);
        }
        let row = |c: [String; 8]| {
            format!(
                "{:<20} {:>9} {:>9} {:>9} {:>10} {:>9} {:>10}  {}",
                c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]
            )
        };
        if header {
            self.line(&row([
                "QUEUE",
                "WAITING",
                "READY",
                "LEASED",
                "SUCCEEDED",
                "DEAD",
                "CANCELLED",
                "OLDEST READY",
            ]
            .map(str::to_owned)));
        }
        let Some(queues) = v["queues"].as_object() else { return };
        for (q, st) in queues {
            let n = |k: &str| st[k].as_u64().unwrap_or(0).to_string();
            let age = st["oldest_ready_age_ms"].as_u64().map_or_else(
                || "-".to_owned(),
                |ms| humantime::format_duration(std::time::Duration::from_millis(ms)).to_string(),
            );
            let mut name = if st["paused"] == true {
                format!("{q} (paused)")
            } else {
                q.clone()
            };
            let limits = limits_text(st);
            if !limits.is_empty() {
                name = format!("{name} [{limits}]");
            }
            self.line(&row([
                name,
                n("WAITING"),
                n("READY"),
                n("LEASED"),
                n("SUCCEEDED"),
                n("DEAD"),
                n("CANCELLED"),
                age,
            ]));
        }
    }
}

/// The order `show` prints a job's fields in.
const JOB_KEYS: [&str; 18] = [
    "id",
    "queue",
    "kind",
    "state",
    "priority",
    "attempts",
    "max_attempts",
    "ready_at",
    "created_at",
    "finished_at",
    "unique_key",
    "lease_token",
    "lease_expires_at",
    "leased_by",
    "last_error",
    "traceparent",
    "payload",
    "result",
];

/// "at most 5 leased, 100 per 1s" from `max_leased` and `rate_limit`
/// (empty without limits).
fn limits_text(v: &Value) -> String {
    let mut parts = Vec::new();
    if let Some(n) = v["max_leased"].as_u64() {
        parts.push(format!("at most {n} leased"));
    }
    if let (Some(n), Some(ms)) = (v["rate_limit"]["limit"].as_u64(), v["rate_limit"]["per_ms"].as_u64()) {
        let per = humantime::format_duration(std::time::Duration::from_millis(ms));
        parts.push(format!("{n} leases per {per}"));
    }
    parts.join(", ")
}

/// "cron */5 * * * * Europe/Berlin" or "every 30s".
fn when_text(v: &Value) -> String {
    match (v["cron"].as_str(), v["every_ms"].as_u64()) {
        (Some(expr), _) => match v["tz"].as_str() {
            Some(tz) => format!("cron {expr} {tz}"),
            None => format!("cron {expr}"),
        },
        (None, Some(ms)) => format!(
            "every {}",
            humantime::format_duration(std::time::Duration::from_millis(ms))
        ),
        (None, None) => "?".to_owned(),
    }
}
