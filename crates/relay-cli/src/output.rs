//! Printing: short text for people, or one JSON object per line (`--json`).

use relay::view;
use relay::{Event, Job, JobId, JobState, LeasedJob, Stats, Timestamp};
use serde_json::json;
use std::io::Write;

pub struct Out {
    json: bool,
}

impl Out {
    pub fn new(json: bool) -> Self {
        Self { json }
    }

    pub fn is_json(&self) -> bool {
        self.json
    }

    /// Writes one line; a closed pipe (`relay jobs | head`) is not an error.
    pub fn line(&self, s: &str) {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{s}");
    }

    fn value(&self, v: &serde_json::Value) {
        self.line(&v.to_string());
    }

    pub fn submitted(&self, id: JobId) {
        if self.json {
            self.value(&json!({"id": id}));
        } else {
            self.line(&id.to_string());
        }
    }

    pub fn leased(&self, l: &LeasedJob) {
        if self.json {
            self.value(&view::leased(l));
        } else {
            let payload = text(&l.payload);
            self.line(&format!(
                "{}\t{}\t{}\t{}\t{}",
                l.id, l.token, l.kind, l.attempt, payload
            ));
        }
    }

    pub fn state(&self, id: JobId, state: JobState, retry_at: Option<Timestamp>) {
        if self.json {
            let mut v = json!({"id": id, "state": state.as_str()});
            if let Some(t) = retry_at {
                v["ready_at"] = json!(view::time(t));
            }
            self.value(&v);
        } else {
            match retry_at {
                Some(t) => self.line(&format!("job {id} {state}, retry at {}", view::time(t))),
                None => self.line(&format!("job {id} {state}")),
            }
        }
    }

    pub fn extended(&self, id: JobId, until: Timestamp) {
        if self.json {
            self.value(&json!({"id": id, "lease_expires_at": view::time(until)}));
        } else {
            self.line(&format!("job {id} leased until {}", view::time(until)));
        }
    }

    pub fn deleted(&self, id: JobId) {
        if self.json {
            self.value(&json!({"id": id, "deleted": true}));
        } else {
            self.line(&format!("job {id} deleted"));
        }
    }

    pub fn job(&self, j: &Job) {
        let v = view::job(j);
        if self.json {
            return self.value(&v);
        }
        let Some(obj) = v.as_object() else { return };
        for (k, val) in obj {
            let shown = match val {
                serde_json::Value::Null => "-".to_owned(),
                serde_json::Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            self.line(&format!("{k:<17}{shown}"));
        }
    }

    pub fn jobs(&self, jobs: &[Job]) {
        if self.json {
            return jobs.iter().for_each(|j| self.value(&view::job(j)));
        }
        self.line(&format!(
            "{:>8}  {:<16} {:<20} {:<10} {:>3} {:>8}  {}",
            "ID", "QUEUE", "KIND", "STATE", "PRI", "ATTEMPTS", "CREATED"
        ));
        for j in jobs {
            let attempts = format!("{}/{}", j.status.attempts, j.status.max_attempts);
            self.line(&format!(
                "{:>8}  {:<16} {:<20} {:<10} {:>3} {:>8}  {}",
                j.id,
                j.queue,
                j.kind,
                j.state(),
                j.priority.get(),
                attempts,
                view::time(j.created_at)
            ));
        }
    }

    pub fn events(&self, events: &[Event]) {
        for e in events {
            if self.json {
                self.value(&view::event(e));
            } else {
                self.line(&format!(
                    "{:>4}  {}  {:<10} {}",
                    e.seq,
                    view::time(e.at),
                    e.kind,
                    e.data
                ));
            }
        }
    }

    pub fn stats(&self, s: &Stats) {
        if self.json {
            let queues: serde_json::Map<String, serde_json::Value> = s
                .queues
                .iter()
                .map(|(q, st)| {
                    let mut counts: serde_json::Map<String, serde_json::Value> = st
                        .counts
                        .iter()
                        .map(|(k, v)| (k.as_str().to_owned(), json!(v)))
                        .collect();
                    counts.insert(
                        "oldest_ready_age_ms".into(),
                        json!(st.oldest_ready_age.map(|d| d.as_millis() as u64)),
                    );
                    (q.clone(), serde_json::Value::Object(counts))
                })
                .collect();
            return self.value(&json!({"queues": queues}));
        }
        self.line(&format!(
            "{:<20} {:>9} {:>9} {:>10} {:>9} {:>10}  {}",
            "QUEUE", "READY", "LEASED", "SUCCEEDED", "DEAD", "CANCELLED", "OLDEST READY"
        ));
        for (q, st) in &s.queues {
            let n = |state| st.counts.get(&state).copied().unwrap_or(0);
            let age = st.oldest_ready_age.map_or_else(
                || "-".to_owned(),
                |d| humantime::format_duration(round_ms(d)).to_string(),
            );
            self.line(&format!(
                "{:<20} {:>9} {:>9} {:>10} {:>9} {:>10}  {}",
                q,
                n(JobState::Ready),
                n(JobState::Leased),
                n(JobState::Succeeded),
                n(JobState::Dead),
                n(JobState::Cancelled),
                age
            ));
        }
    }
}

fn round_ms(d: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_millis(u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// A payload as one line of text: as-is when it is printable UTF-8,
/// JSON-quoted when it holds line breaks or tabs, base64 when not UTF-8.
fn text(b: &[u8]) -> String {
    match std::str::from_utf8(b) {
        Ok(s) if !s.chars().any(char::is_control) => s.to_owned(),
        Ok(s) => serde_json::Value::String(s.to_owned()).to_string(),
        Err(_) => view::leased_payload_base64(b),
    }
}
