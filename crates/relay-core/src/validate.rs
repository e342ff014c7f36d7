//! Limits on what callers may submit, checked before anything is written.

use std::time::Duration;

/// A caller's input was refused; nothing was changed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {field}: {reason}")]
pub struct InvalidInput {
    /// The name of the refused input, e.g. `queue`, `payload` or `tags`.
    pub field: &'static str,
    /// Why it was refused, in words meant for the caller.
    pub reason: String,
}

impl InvalidInput {
    /// A refusal of `field` for `reason`.
    pub fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

/// Size limits; the payload limit is configurable per Relay instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest payload accepted, in bytes (inclusive); 1 MiB by default.
    pub max_payload_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_payload_bytes: 1 << 20,
        }
    }
}

/// Longest queue, kind, worker or event-kind name, in characters.
pub const MAX_NAME_LEN: usize = 64;
/// Longest unique key, in characters.
pub const MAX_KEY_LEN: usize = 256;
/// Longest error text kept from a nack, in bytes (longer texts are
/// truncated by [`truncate_error`], not refused).
pub const MAX_ERROR_LEN: usize = 8 * 1024;
/// Most jobs one job may depend on.
pub const MAX_DEPENDENCIES: usize = 10_000;
/// Most tags on one job.
pub const MAX_TAGS: usize = 8;
/// Longest text `JobFilter::error_contains` looks for, in characters.
pub const MAX_SEARCH_LEN: usize = 256;
/// Longest lease: a lost worker's job must come back within a day.
pub const MAX_LEASE: Duration = Duration::from_secs(24 * 3600);

impl Limits {
    /// A W3C trace context `traceparent` value of version 00, the one the
    /// recommendation defines: `00-TRACE_ID-PARENT_ID-FLAGS` in lowercase
    /// hex (32, 16 and 2 digits), neither id all zeros
    /// (<https://www.w3.org/TR/trace-context/#traceparent-header>).
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `traceparent` when `v` is not of that form.
    pub fn traceparent(&self, v: &str) -> Result<(), InvalidInput> {
        let bad = |why: &str| {
            InvalidInput::new(
                "traceparent",
                format!("{why}: expected 00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>, lowercase"),
            )
        };
        let hex = |s: &str, n: usize| s.len() == n && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        let parts: Vec<&str> = v.split('-').collect();
        let [version, trace, parent, flags] = parts.as_slice() else {
            return Err(bad("not four fields"));
        };
        if *version != "00" {
            return Err(bad("only version 00 is defined"));
        }
        if !(hex(trace, 32) && hex(parent, 16) && hex(flags, 2)) {
            return Err(bad("a field is not lowercase hex of its length"));
        }
        if trace.bytes().all(|b| b == b'0') || parent.bytes().all(|b| b == b'0') {
            return Err(bad("an all-zero trace or parent id"));
        }
        Ok(())
    }

    /// A queue name: 1-64 of `[A-Za-z0-9_.-]`.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `queue` when `q` is empty, longer than
    /// [`MAX_NAME_LEN`] bytes, or holds any other character.
    pub fn queue(&self, q: &str) -> Result<(), InvalidInput> {
        name("queue", q)
    }

    /// A schedule's name: as a queue's (it appears in URLs).
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `name`, on the terms of [`Limits::queue`].
    pub fn schedule_name(&self, v: &str) -> Result<(), InvalidInput> {
        name("name", v)
    }

    /// A job kind, worker id or event kind: 1-64 characters (counted as
    /// `char`s, not bytes), none of them a control character.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] naming `field` when `v` is empty, too long, or
    /// holds a control character.
    pub fn label(&self, field: &'static str, v: &str) -> Result<(), InvalidInput> {
        let n = v.chars().count();
        if n == 0 || n > MAX_NAME_LEN {
            return Err(InvalidInput::new(
                field,
                format!("must be 1-{MAX_NAME_LEN} characters, got {n}"),
            ));
        }
        if v.chars().any(char::is_control) {
            return Err(InvalidInput::new(field, "must not contain control characters"));
        }
        Ok(())
    }

    /// A job's tags: at most [`MAX_TAGS`], each 1-64 characters without
    /// control characters or commas. Returns them in the order given, each
    /// once.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `tags` when there are more than
    /// [`MAX_TAGS`] (duplicates included) or one tag is refused by
    /// [`Limits::tag`].
    pub fn tags(&self, tags: &[String]) -> Result<Vec<String>, InvalidInput> {
        if tags.len() > MAX_TAGS {
            return Err(InvalidInput::new(
                "tags",
                format!("at most {MAX_TAGS} tags per job, got {}", tags.len()),
            ));
        }
        let mut out: Vec<String> = Vec::with_capacity(tags.len());
        for t in tags {
            self.tag(t)?;
            if !out.contains(t) {
                out.push(t.clone());
            }
        }
        Ok(out)
    }

    /// One tag (see [`Limits::tags`]).
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `tags` when `t` is not 1-64 characters,
    /// or holds a control character or a comma.
    pub fn tag(&self, t: &str) -> Result<(), InvalidInput> {
        self.label("tags", t)?;
        if t.contains(',') {
            return Err(InvalidInput::new("tags", format!("{t:?}: a tag has no commas")));
        }
        Ok(())
    }

    /// The jobs a job depends on: at most [`MAX_DEPENDENCIES`], each a
    /// positive id. Returns them sorted, each once.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `depends_on` when there are more than
    /// [`MAX_DEPENDENCIES`] ids (duplicates included) or one is not
    /// positive. Whether the jobs exist is not checked here.
    pub fn dependencies(&self, ids: &[crate::JobId]) -> Result<Vec<crate::JobId>, InvalidInput> {
        if ids.len() > MAX_DEPENDENCIES {
            return Err(InvalidInput::new(
                "depends_on",
                format!("{} jobs exceeds the limit of {MAX_DEPENDENCIES}", ids.len()),
            ));
        }
        if let Some(bad) = ids.iter().find(|id| id.0 <= 0) {
            return Err(InvalidInput::new("depends_on", format!("{bad} is not a job id")));
        }
        let mut v = ids.to_vec();
        v.sort_unstable();
        v.dedup();
        Ok(v)
    }

    /// A payload: at most `max_payload_bytes` bytes.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `payload` when `p` is longer.
    pub fn payload(&self, p: &[u8]) -> Result<(), InvalidInput> {
        if p.len() > self.max_payload_bytes {
            return Err(InvalidInput::new(
                "payload",
                format!(
                    "{} bytes exceeds the limit of {} bytes",
                    p.len(),
                    self.max_payload_bytes
                ),
            ));
        }
        Ok(())
    }

    /// A unique key: 1 to [`MAX_KEY_LEN`] characters (counted as `char`s),
    /// of any kind.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `unique_key` when `k` is empty or longer.
    pub fn unique_key(&self, k: &str) -> Result<(), InvalidInput> {
        let n = k.chars().count();
        if n == 0 || n > MAX_KEY_LEN {
            return Err(InvalidInput::new(
                "unique_key",
                format!("must be 1-{MAX_KEY_LEN} characters, got {n}"),
            ));
        }
        Ok(())
    }

    /// A group key: 1 to [`MAX_KEY_LEN`] characters (counted as `char`s),
    /// of any kind.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `group` when `g` is empty or longer.
    pub fn group(&self, g: &str) -> Result<(), InvalidInput> {
        let n = g.chars().count();
        if n == 0 || n > MAX_KEY_LEN {
            return Err(InvalidInput::new(
                "group",
                format!("must be 1-{MAX_KEY_LEN} characters, got {n}"),
            ));
        }
        Ok(())
    }

    /// An attempt budget: 1-1000.
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `max_attempts` when `n` is 0 or above 1000.
    pub fn max_attempts(&self, n: u32) -> Result<(), InvalidInput> {
        if n == 0 || n > 1000 {
            return Err(InvalidInput::new("max_attempts", format!("must be 1-1000, got {n}")));
        }
        Ok(())
    }

    /// A lease length: more than zero and at most [`MAX_LEASE`].
    ///
    /// # Errors
    ///
    /// [`InvalidInput`] for field `lease_for` when `d` is zero or longer.
    pub fn lease_for(&self, d: Duration) -> Result<(), InvalidInput> {
        if d.is_zero() || d > MAX_LEASE {
            return Err(InvalidInput::new(
                "lease_for",
                format!("must be more than 0 and at most 24h, got {d:?}"),
            ));
        }
        Ok(())
    }
}

fn name(field: &'static str, v: &str) -> Result<(), InvalidInput> {
    if v.is_empty() || v.len() > MAX_NAME_LEN {
        return Err(InvalidInput::new(
            field,
            format!("must be 1-{MAX_NAME_LEN} characters, got {}", v.len()),
        ));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(InvalidInput::new(
            field,
            format!("{c:?} is not allowed (use A-Z, a-z, 0-9, '_', '.', '-')"),
        ));
    }
    Ok(())
}

/// Cuts an error text to [`MAX_ERROR_LEN`] bytes on a character boundary.
pub fn truncate_error(s: &str) -> &str {
    if s.len() <= MAX_ERROR_LEN {
        return s;
    }
    let mut end = MAX_ERROR_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names() {
        let l = Limits::default();
        assert!(l.queue("emails.v2_high-prio").is_ok());
        assert_eq!(l.queue("").unwrap_err().field, "queue");
        assert!(l.queue(&"q".repeat(64)).is_ok());
        assert!(l.queue(&"q".repeat(65)).is_err());
        assert!(l.queue("a b").is_err());
        assert!(l.queue("é").is_err());
    }

    #[test]
    fn payload_limit_is_inclusive() {
        let l = Limits { max_payload_bytes: 4 };
        assert!(l.payload(b"1234").is_ok());
        let e = l.payload(b"12345").unwrap_err();
        assert!(e.reason.contains("limit of 4"), "{e}");
    }

    #[test]
    fn labels_keys_attempts_leases() {
        let l = Limits::default();
        assert!(l.label("kind", "send-email").is_ok());
        assert!(l.label("kind", "").is_err());
        assert!(l.label("kind", "a\nb").is_err());
        assert!(l.unique_key(&"k".repeat(257)).is_err());
        // Lengths count characters, not bytes: 64 two-byte characters are fine.
        assert!(l.label("kind", &"é".repeat(64)).is_ok());
        assert!(l.label("kind", &"é".repeat(65)).is_err());
        assert!(l.unique_key(&"é".repeat(256)).is_ok());
        assert!(l.max_attempts(0).is_err());
        assert!(l.max_attempts(25).is_ok());
        assert!(l.lease_for(Duration::ZERO).is_err());
        assert!(l.lease_for(Duration::from_secs(90_000)).is_err());
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let s = "é".repeat(MAX_ERROR_LEN);
        let t = truncate_error(&s);
        assert!(t.len() <= MAX_ERROR_LEN && t.len() >= MAX_ERROR_LEN - 1);
        assert_eq!(truncate_error("short"), "short");
    }
}
