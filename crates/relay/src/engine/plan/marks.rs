//! The plan's side of marks (values kept under a key until they expire:
//! the job an idempotency key named, a session that was logged out): read
//! once per batch, written with the batch.

use super::{Plan, Undo};
use crate::error::Result;
use relay_core::Timestamp;
use relay_store::MarkWrite;

/// A mark as this batch sees it.
#[derive(Clone)]
pub(super) struct MarkEntry {
    /// The value and its expiry (`None`: no mark, or an expired one).
    value: Option<(String, Timestamp)>,
    /// The batch writes it.
    written: bool,
}

impl Plan<'_> {
    /// Mark `key`'s value as this batch sees it (`None`: none, or expired).
    pub(crate) fn mark_value(&mut self, key: &str) -> Result<Option<String>> {
        if !self.marks.contains_key(key) {
            let value = self.store.mark_get(key, self.now)?;
            self.marks.insert(
                key.to_owned(),
                MarkEntry {
                    // A stored mark's expiry is not read: the batch only
                    // needs to know it is live now.
                    value: value.map(|v| (v, Timestamp::from_millis(i64::MAX))),
                    written: false,
                },
            );
        }
        Ok(self
            .marks
            .get(key)
            .and_then(|e| e.value.as_ref().map(|(v, _)| v.clone())))
    }

    /// Event `key`'s payload, if it was emitted (its mark `event:<key>`,
    /// read with the key's lock: see `Store::event_get`).
    pub(crate) fn event_payload(&mut self, key: &str) -> Result<Option<Vec<u8>>> {
        let mark = event_mark(key);
        if !self.marks.contains_key(&mark) {
            let value = self.store.event_get(&mark, self.now)?;
            self.marks.insert(
                mark.clone(),
                MarkEntry {
                    value: value.map(|v| (v, Timestamp::from_millis(i64::MAX))),
                    written: false,
                },
            );
        }
        self.marks
            .get(&mark)
            .and_then(|e| e.value.as_ref())
            .map(|(text, _)| event_bytes(key, text))
            .transpose()
    }

    /// Writes mark `key`, kept until `expires_at`.
    pub(crate) fn set_mark(&mut self, key: &str, value: String, expires_at: Timestamp) -> Result<()> {
        self.mark_value(key)?;
        let Some(e) = self.marks.get_mut(key) else {
            return Ok(());
        };
        if self.logging {
            self.undo.push(Undo::Mark(key.to_owned(), e.clone()));
        }
        e.value = Some((value, expires_at));
        e.written = true;
        Ok(())
    }

    pub(super) fn restore_mark(&mut self, key: String, entry: MarkEntry) {
        self.marks.insert(key, entry);
    }
}

/// The marks a batch writes, in key order.
pub(super) fn writes(marks: &super::HashMap<String, MarkEntry>) -> Vec<MarkWrite<'_>> {
    let mut out: Vec<MarkWrite<'_>> = marks
        .iter()
        .filter(|(_, e)| e.written)
        .filter_map(|(key, e)| {
            e.value.as_ref().map(|(value, expires_at)| MarkWrite {
                key,
                value,
                expires_at: *expires_at,
            })
        })
        .collect();
    out.sort_unstable_by(|a, b| a.key.cmp(b.key));
    out
}

/// The mark an emitted event is kept under.
pub(crate) fn event_mark(key: &str) -> String {
    format!("event:{key}")
}

/// An event's payload as its mark keeps it: `j` and its JSON text, or `b`
/// and its bytes in base64.
pub(crate) fn event_text(payload: &[u8]) -> String {
    use base64::Engine as _;
    match std::str::from_utf8(payload) {
        Ok(t) if serde_json::from_str::<&serde_json::value::RawValue>(t).is_ok() => format!("j{t}"),
        _ => format!("b{}", base64::engine::general_purpose::STANDARD.encode(payload)),
    }
}

/// An event's payload read back from its mark ([`event_text`]).
fn event_bytes(key: &str, text: &str) -> Result<Vec<u8>> {
    use base64::Engine as _;
    let corrupt = |why: &str| crate::Error::Corrupt {
        job: None,
        reason: format!("the mark of event {key:?}: {why}"),
    };
    match text.split_at_checked(1) {
        Some(("j", json)) => Ok(json.as_bytes().to_vec()),
        Some(("b", b64)) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .map_err(|_| corrupt("not base64")),
        _ => Err(corrupt("neither j nor b")),
    }
}
