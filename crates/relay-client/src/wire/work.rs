//! The worker protocol: `POST /v1/work` reports any number of outcomes and
//! leases the next jobs in one call (one commit), `POST /v1/heartbeat`
//! extends many leases at once. Each item is answered on its own.

use super::{base64_pair, present, ErrorCode, ErrorDetail, Lease, LeasedJob};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

/// Most outcomes of one `POST /v1/work`, and leases of one `POST /v1/heartbeat`.
pub const MAX_ITEMS: usize = 10_000;

/// `POST /v1/work`: a worker's outcomes, and its next lease.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Work {
    /// What became of leased jobs (at most [`MAX_ITEMS`]), applied in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outcomes: Vec<Outcome>,
    /// The jobs to lease after them, in the same commit. Its `wait_ms` is
    /// honoured only when there are no outcomes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<Lease>,
}

/// What an [`Outcome`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OutcomeKind {
    /// Succeeded (`result` or `result_base64`).
    Ack,
    /// Failed (`error`; `retry_in_ms`, `permanent`).
    Nack,
    /// Given back, the attempt not counted (`in_ms`: not before then).
    Release,
    /// Put to sleep under step `step` until `until`: WAITING, holding no
    /// lease, the attempt not counted.
    Sleep,
    /// Waiting for event `key` under step `step` until `until`: WAITING,
    /// holding no lease, the attempt not counted, until the event is
    /// emitted or `until` (READY at once when it was emitted already).
    Wait,
    /// Step `step` recorded with `output` (or `output_base64`), the job
    /// still LEASED: as `POST /v1/jobs/{id}/steps`. When a record of the
    /// name stood already it stands, and the answer's `earlier` holds it.
    Step,
    /// Awaiting job `child`'s end under step `step`: WAITING on it, holding
    /// no lease, the attempt not counted, until its end records how it
    /// ended as the step and makes the job READY (READY at once when it has
    /// ended already).
    Join,
}

impl OutcomeKind {
    /// Its name on the wire.
    pub fn name(self) -> &'static str {
        match self {
            Self::Ack => "ack",
            Self::Nack => "nack",
            Self::Release => "release",
            Self::Sleep => "sleep",
            Self::Wait => "wait",
            Self::Step => "step",
            Self::Join => "join",
        }
    }
}

/// One leased job's outcome. Fields that do not belong to its `outcome`
/// are refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Outcome {
    /// The job.
    pub id: i64,
    /// Its lease's token.
    pub token: i64,
    /// What became of it.
    pub outcome: OutcomeKind,
    /// An ack's result as a JSON value, kept as its JSON text.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result: Option<Box<RawValue>>,
    /// An ack's result as bytes, base64.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub result_base64: Option<Option<String>>,
    /// A nack's error (kept as the job's last error).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// A nack: retry after this long instead of the back-off policy's delay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
    /// A nack: no retry can fix it, DEAD now.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub permanent: bool,
    /// A release: READY again only after this long (a snooze).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub in_ms: Option<u64>,
    /// A sleep's, a wait's or a step record's step name (a step of that
    /// name recorded earlier wins).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub step: Option<String>,
    /// A sleep: when the job wakes (RFC 3339); a wait: when it gives up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<String>,
    /// A wait: the event's key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// A step record's output as a JSON value, kept as its JSON text.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output: Option<Box<RawValue>>,
    /// A step record's output as bytes, base64.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub output_base64: Option<Option<String>>,
    /// A join: the job awaited.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<i64>,
}

impl Outcome {
    fn new(id: i64, token: i64, outcome: OutcomeKind) -> Self {
        Self {
            id,
            token,
            outcome,
            result: None,
            result_base64: None,
            error: None,
            retry_in_ms: None,
            permanent: false,
            in_ms: None,
            step: None,
            until: None,
            key: None,
            output: None,
            output_base64: None,
            child: None,
        }
    }

    /// Awaiting job `child`'s end under step `step`.
    pub fn join(id: i64, token: i64, step: impl Into<String>, child: i64) -> Self {
        Self {
            step: Some(step.into()),
            child: Some(child),
            ..Self::new(id, token, OutcomeKind::Join)
        }
    }

    /// Step `name` recorded with `output`'s bytes (as a JSON value when
    /// they are JSON, else base64), the job still LEASED.
    pub fn step(id: i64, token: i64, name: impl Into<String>, output: &[u8]) -> Self {
        let (output, output_base64) = super::json_or_base64(output);
        Self {
            step: Some(name.into()),
            output,
            output_base64,
            ..Self::new(id, token, OutcomeKind::Step)
        }
    }

    /// Waiting for event `key` under step `step` until `until` (RFC 3339).
    pub fn wait(
        id: i64,
        token: i64,
        step: impl Into<String>,
        key: impl Into<String>,
        until: impl Into<String>,
    ) -> Self {
        Self {
            step: Some(step.into()),
            key: Some(key.into()),
            until: Some(until.into()),
            ..Self::new(id, token, OutcomeKind::Wait)
        }
    }

    /// Asleep under step `step` until `until` (RFC 3339).
    pub fn sleep(id: i64, token: i64, step: impl Into<String>, until: impl Into<String>) -> Self {
        Self {
            step: Some(step.into()),
            until: Some(until.into()),
            ..Self::new(id, token, OutcomeKind::Sleep)
        }
    }

    /// Succeeded, with `result`'s bytes (none when `None` or empty).
    pub fn ack(id: i64, token: i64, result: Option<&[u8]>) -> Self {
        Self {
            result_base64: result.and_then(base64_pair),
            ..Self::new(id, token, OutcomeKind::Ack)
        }
    }

    /// Failed: retried after `retry_in_ms` (or the back-off) unless its
    /// attempts are spent.
    pub fn nack(id: i64, token: i64, error: impl Into<String>, retry_in_ms: Option<u64>) -> Self {
        Self {
            error: Some(error.into()),
            retry_in_ms,
            ..Self::new(id, token, OutcomeKind::Nack)
        }
    }

    /// Failed for good: DEAD now.
    pub fn nack_permanent(id: i64, token: i64, error: impl Into<String>) -> Self {
        Self {
            permanent: true,
            ..Self::nack(id, token, error, None)
        }
    }

    /// Given back untried; READY again after `in_ms` when given.
    pub fn release(id: i64, token: i64, in_ms: Option<u64>) -> Self {
        Self {
            in_ms,
            ..Self::new(id, token, OutcomeKind::Release)
        }
    }
}

/// `POST /v1/work`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Worked {
    /// One answer per outcome, in the order given.
    pub outcomes: Vec<ItemAnswer>,
    /// The jobs leased (none without a `lease`, or when none was ready).
    pub jobs: Vec<LeasedJob>,
}

/// `POST /v1/heartbeat`: extend many leases at once.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Heartbeat {
    /// The leases (at most [`MAX_ITEMS`]; none renews nothing and
    /// answers none).
    #[cfg_attr(feature = "schema", schemars(length(max = MAX_ITEMS)))]
    pub leases: Vec<HeldLease>,
    /// Each lease's new length from now, where it gives none (30 s when
    /// left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub lease_for_ms: Option<u64>,
}

/// A lease a worker holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct HeldLease {
    /// The job.
    pub id: i64,
    /// Its lease's token.
    pub token: i64,
    /// Its new length from now (the call's `lease_for_ms` when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 86_400_000)))]
    pub lease_for_ms: Option<u64>,
}

/// `POST /v1/heartbeat`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Beaten {
    /// One answer per lease, in the order given.
    pub leases: Vec<ItemAnswer>,
}

/// What became of one item of a batch call: what it changed, or its own
/// error (`lease_lost`, `invalid_state`, `not_found`, `invalid_input`),
/// which leaves its job unchanged and fails no other item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ItemAnswer {
    /// The job.
    pub id: i64,
    /// Its state after the call (an outcome).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<super::State>,
    /// When it is due again (a nack that retries, a delayed release).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub ready_at: Option<String>,
    /// The lease's new expiry (a heartbeat).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub lease_expires_at: Option<String>,
    /// Why this item was not applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// A step record whose name was recorded already: the record that
    /// stands (this one was not taken; return its output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub earlier: Option<super::Step>,
}

impl ItemAnswer {
    /// Job `id`, nothing said of it yet.
    pub fn new(id: i64) -> Self {
        Self {
            id,
            state: None,
            ready_at: None,
            lease_expires_at: None,
            error: None,
            earlier: None,
        }
    }

    /// Job `id`'s item, refused with `code` and `message`.
    pub fn refused(id: i64, code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            error: Some(ErrorDetail {
                code,
                message: message.into(),
            }),
            ..Self::new(id)
        }
    }
}
