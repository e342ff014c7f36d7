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
pub mod calls;
mod request;
mod work;
mod workers;

pub use answer::*;
pub use calls::{Call, CallInfo, DeadQuery, Method, Nothing, Part, PathParam, CALLS};
pub use request::*;
pub use work::*;
pub use workers::*;

/// The longest duration a request may give, in milliseconds (what fits a
/// `u64` of microseconds comfortably: about 292 million years).
pub const MAX_MS: u64 = u64::MAX / 1_000_000;

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
    /// `null`.
    pub fn null() -> Self {
        Self(serde_json::value::RawValue::NULL.to_owned())
    }

    /// `bytes` as they are when they hold one JSON text (any JSON: numbers
    /// past `f64`, keys repeated); `None` when they do not.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        serde_json::from_slice::<Box<serde_json::value::RawValue>>(bytes)
            .ok()
            .map(Self)
    }

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

/// Any JSON value (a payload, a result): its text as stored.
#[cfg(feature = "schema")]
impl schemars::JsonSchema for JsonText {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "JsonText".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "Any JSON value, as stored (null when empty); absent when the bytes are not JSON (then the *_base64 field)."
        })
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

/// `bytes` as a request's (`name`, `name_base64`) pair: a JSON value when
/// they are JSON text, else base64; neither when empty.
#[allow(clippy::type_complexity)]
pub(crate) fn json_or_base64(bytes: &[u8]) -> (Option<Box<serde_json::value::RawValue>>, Option<Option<String>>) {
    let json = (!bytes.is_empty())
        .then(|| std::str::from_utf8(bytes).ok())
        .flatten()
        .and_then(|t| serde_json::value::RawValue::from_string(t.to_owned()).ok());
    let b64 = if json.is_some() { None } else { base64_pair(bytes) };
    (json, b64)
}

/// A job's state, as the API spells it: in capitals when written, in any
/// case when read (`?state=dead`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "UPPERCASE")]
pub enum State {
    /// Waits for the jobs it depends on.
    Waiting,
    /// Due: a worker may lease it.
    Ready,
    /// Its first run (or its next, after a snooze or a debounce) is at
    /// `ready_at`, in the future.
    Scheduled,
    /// Backing off after a failed attempt: its next attempt is at
    /// `ready_at`.
    Retrying,
    /// A worker holds it.
    Leased,
    /// Acked.
    Succeeded,
    /// Failed for good: attempts spent, a permanent nack, a dependency failed.
    Dead,
    /// Cancelled.
    Cancelled,
    /// A state this build does not know, in an answer (a newer server's):
    /// the answer is still read. Never sent, and refused in a request.
    #[cfg_attr(feature = "schema", schemars(skip))]
    Other,
}

impl State {
    /// Every state, in the order of a job's life.
    pub const ALL: [Self; 8] = [
        Self::Waiting,
        Self::Scheduled,
        Self::Retrying,
        Self::Ready,
        Self::Leased,
        Self::Succeeded,
        Self::Dead,
        Self::Cancelled,
    ];

    /// Its name in capitals, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Waiting => "WAITING",
            Self::Ready => "READY",
            Self::Scheduled => "SCHEDULED",
            Self::Retrying => "RETRYING",
            Self::Leased => "LEASED",
            Self::Succeeded => "SUCCEEDED",
            Self::Dead => "DEAD",
            Self::Cancelled => "CANCELLED",
            Self::Other => "OTHER",
        }
    }

    /// Whether a job in it is done with for good (nothing leases it again
    /// unless retried).
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Dead | Self::Cancelled)
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for State {
    type Err = String;

    /// A state's name, in any case.
    fn from_str(s: &str) -> Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown state {s:?}: use WAITING, SCHEDULED, RETRYING, READY, LEASED, SUCCEEDED, DEAD or CANCELLED"))
    }
}

/// In an answer, a name this build does not know reads as
/// [`State::Other`]; a request's state is read strictly (`strict_state`).
impl<'de> Deserialize<'de> for State {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Ok(s.parse().unwrap_or(Self::Other))
    }
}

/// A request's state: one of the six, in any case; anything else is
/// refused with the states to use.
pub(crate) fn strict_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<State>, D::Error> {
    let s = Option::<std::borrow::Cow<'de, str>>::deserialize(d)?;
    s.map(|s| s.parse().map_err(serde::de::Error::custom)).transpose()
}

/// What a bulk action does to every job its filter matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum BulkAction {
    /// DEAD or CANCELLED jobs READY again, their attempts reset.
    Retry,
    /// Unfinished jobs CANCELLED.
    Cancel,
    /// Jobs deleted, with their events (a LEASED one is passed over).
    Delete,
}

impl BulkAction {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retry => "retry",
            Self::Cancel => "cancel",
            Self::Delete => "delete",
        }
    }
}

impl std::str::FromStr for BulkAction {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        [Self::Retry, Self::Cancel, Self::Delete]
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("unknown action {s:?}: use retry, cancel or delete"))
    }
}

impl<'de> Deserialize<'de> for BulkAction {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = std::borrow::Cow::<'de, str>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What happens to a job when one it depends on ends DEAD or CANCELLED.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum DependencyFailure {
    /// It is CANCELLED too (the default).
    #[default]
    Cancel,
    /// It runs anyway.
    Run,
}

impl DependencyFailure {
    /// Its name, as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Cancel => "cancel",
            Self::Run => "run",
        }
    }
}

impl std::str::FromStr for DependencyFailure {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "cancel" => Ok(Self::Cancel),
            "run" => Ok(Self::Run),
            other => Err(format!("{other:?} is neither \"cancel\" nor \"run\"")),
        }
    }
}
