//! The jobs search form: its fields as the browser sends them, as the
//! library's filter, as a link's query and as a bulk action's hidden fields.

use super::{encode, now};
use maud::{html, Markup};
use relay::{JobFilter, Timestamp};
use serde::Deserialize;
use std::fmt::Write as _;

/// The search form's fields, as the browser sends them (empty: not set).
#[derive(Deserialize, Default, Clone)]
pub(crate) struct FilterForm {
    #[serde(default)]
    pub queue: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub tag: String,
    /// RFC 3339, or a duration back from now ("1h").
    #[serde(default)]
    pub since: String,
    #[serde(default)]
    pub until: String,
    #[serde(default)]
    pub error: String,
}

/// A form field, trimmed; `None` when empty.
pub(super) fn opt(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

/// A time in a form: RFC 3339, or how long ago ("90m", "2h", "1day").
fn form_time(field: &str, t: &str) -> Result<Timestamp, String> {
    if let Ok(d) = humantime::parse_duration(t) {
        let ms = i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        return Ok(Timestamp::from_millis(now().as_millis().saturating_sub(ms)));
    }
    crate::parse::time_arg(field, t).map_err(|e| e.message)
}

impl FilterForm {
    pub fn to_filter(&self, limit: u32) -> Result<JobFilter, String> {
        Ok(JobFilter {
            queue: opt(&self.queue),
            state: opt(&self.state)
                .map(|s| crate::parse::state_arg(&s))
                .transpose()
                .map_err(|e| e.message)?,
            kind: opt(&self.kind),
            tag: opt(&self.tag),
            since: opt(&self.since).map(|t| form_time("since", &t)).transpose()?,
            until: opt(&self.until).map(|t| form_time("until", &t)).transpose()?,
            error_contains: opt(&self.error),
            before: None,
            limit,
        })
    }

    /// The filter as a query string (`queue=a&kind=b`), for links.
    pub fn query(&self) -> String {
        let mut out = String::new();
        for (k, v) in self.pairs() {
            if !v.trim().is_empty() {
                let _ = write!(out, "{}{k}={}", if out.is_empty() { "" } else { "&" }, encode(v.trim()));
            }
        }
        out
    }

    fn pairs(&self) -> [(&'static str, &str); 7] {
        [
            ("queue", &self.queue),
            ("state", &self.state),
            ("kind", &self.kind),
            ("tag", &self.tag),
            ("since", &self.since),
            ("until", &self.until),
            ("error", &self.error),
        ]
    }

    /// The filter as hidden fields of a bulk action's form.
    pub fn hidden(&self) -> Markup {
        html! {
            @for (k, v) in self.pairs() {
                @if !v.trim().is_empty() { input type="hidden" name=(k) value=(v.trim()); }
            }
        }
    }
}
