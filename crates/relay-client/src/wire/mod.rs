//! The bodies of Relay's HTTP API, as the server reads and writes them.
//!
//! Requests are read by the server with these very types (unknown fields
//! are refused), so a client built on them cannot drift from it. Responses
//! keep every field the server sends: a test turns real answers into these
//! types and back and finds them unchanged.
//!
//! Durations are whole milliseconds (`*_ms`), times RFC 3339 strings in UTC
//! with milliseconds, states in capitals. Payloads and results are bytes: a
//! JSON text travels as that text (`payload`, read as a [`JsonText`], byte
//! for byte), anything else as base64 (`payload_base64`); see [`Bytes`].

use serde::Deserialize;
use serde_json::Value;

mod answer;
mod request;
mod work;

pub use answer::*;
pub use request::*;
pub use work::*;

/// A field that was given (as `Some`, null included), unlike one left out
/// (`None`, with `#[serde(default)]`).
pub(crate) fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A JSON text as the server sent it, byte for byte: keys in their order,
/// duplicates kept, numbers as written (`1E2`, `12345678901234567890123`).
/// [`JsonText::value`] parses it.
#[derive(Debug, Clone, serde::Serialize, Deserialize)]
#[serde(transparent)]
pub struct JsonText(Box<serde_json::value::RawValue>);

impl JsonText {
    /// The text.
    pub fn get(&self) -> &str {
        self.0.get()
    }

    /// Whether it is `null`.
    pub fn is_null(&self) -> bool {
        self.0.get() == "null"
    }

    /// The text parsed into a value.
    ///
    /// # Errors
    ///
    /// JSON a [`Value`] cannot hold: a number past `f64` (`1e999`), nesting
    /// deeper than 128.
    pub fn value(&self) -> serde_json::Result<Value> {
        serde_json::from_str(self.0.get())
    }
}

impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// Bytes as the API carries them, decoded from a `payload` /
/// `payload_base64` (or `result` / `result_base64`) pair.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bytes {
    /// None, or empty (`null`).
    Empty,
    /// A JSON text, exactly as stored (parse it with `serde_json`).
    Json(String),
    /// Bytes that are not a JSON text.
    Raw(Vec<u8>),
}

impl Bytes {
    /// The pair's bytes: `json` as given (`null` or `None`: none), else
    /// `base64` decoded.
    ///
    /// # Errors
    ///
    /// The decoder's message when `base64` is not base64.
    pub fn from_pair(json: Option<&JsonText>, base64: Option<&str>) -> Result<Self, String> {
        use base64::Engine as _;
        match (json, base64) {
            (Some(v), _) if !v.is_null() => Ok(Self::Json(v.get().to_owned())),
            (_, Some(b)) => base64::engine::general_purpose::STANDARD
                .decode(b)
                .map(Self::Raw)
                .map_err(|e| format!("not base64: {e}")),
            _ => Ok(Self::Empty),
        }
    }

    /// The bytes themselves: the JSON text as stored, or the raw bytes.
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Self::Empty => Vec::new(),
            Self::Json(t) => t.clone().into_bytes(),
            Self::Raw(b) => b.clone(),
        }
    }
}

/// `bytes` as a request's (`payload`, `payload_base64`) pair: sent as base64,
/// so the server keeps exactly these bytes (a JSON text among them is
/// shown as JSON when read back, as if it had been sent as JSON).
pub(crate) fn base64_pair(bytes: &[u8]) -> Option<Option<String>> {
    use base64::Engine as _;
    (!bytes.is_empty()).then(|| Some(base64::engine::general_purpose::STANDARD.encode(bytes)))
}
