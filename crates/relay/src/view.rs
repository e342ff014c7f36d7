//! JSON views of jobs and events, shared by the CLI and the server, with
//! field names as in DESIGN.md and states in capitals.
//!
//! Times are RFC 3339 strings in UTC with milliseconds.
//!
//! Payloads and results are bytes, JSON by convention. Bytes that are a
//! JSON text are shown as that JSON value (`payload`: `{"n":1}` stays an
//! object, `"{\"n\":1}"` stays a string); empty bytes as `null`; any other
//! bytes (text that is not JSON, binary) as base64 under `payload_base64`
//! (`result_base64`), the `_base64` suffix marking them. So what was
//! submitted as a JSON value comes back as that value, and no byte is ever
//! lost or mangled.

use crate::{Event, Job, LeasedJob, Timestamp};
use base64::Engine as _;
use serde_json::{json, Map, Value};

/// RFC 3339 with milliseconds, e.g. `2026-11-29T19:00:00.123Z`.
pub fn time(t: Timestamp) -> String {
    t.to_rfc3339()
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A job: `{"id", "queue", "kind", "state", "priority", "attempts",
/// "max_attempts", "ready_at", "created_at", "finished_at", "unique_key",
/// "lease_token", "lease_expires_at", "leased_by", "last_error",
/// "lease_for_ms", "timeout_ms", "traceparent", "tags", "waiting_on",
/// "payload" (or "payload_base64"), "result" (or "result_base64")}`, with
/// `null` for what the job lacks.
pub fn job(j: &Job) -> Value {
    serde_json::to_value(Parsed(JobView(j))).unwrap_or_default()
}

/// A view whose payload and result are parsed into values (for a
/// [`Value`], which cannot hold JSON text as it is): what is not a
/// [`Value`] (`1e999`, nesting past serde_json's limit) goes as base64.
struct Parsed<V>(V);

/// [`job`] as a value to serialize straight into an answer: the payload
/// and result go out as the JSON text stored, byte for byte (keys in their
/// order, numbers as written), where [`job`]'s `Value` would reorder them.
#[derive(Debug, Clone, Copy)]
pub struct JobView<'a>(pub &'a Job);

impl serde::Serialize for JobView<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.write(ser, true)
    }
}

impl serde::Serialize for Parsed<JobView<'_>> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.0.write(ser, false)
    }
}

impl JobView<'_> {
    fn write<S: serde::Serializer>(&self, ser: S, raw: bool) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let j = self.0;
        let s = &j.status;
        let lease = s.lease.as_ref();
        let mut m = ser.serialize_map(Some(22))?;
        m.serialize_entry("id", &j.id)?;
        m.serialize_entry("queue", &j.queue)?;
        m.serialize_entry("kind", &j.kind)?;
        m.serialize_entry("state", s.state.as_str())?;
        m.serialize_entry("priority", &j.priority.get())?;
        m.serialize_entry("attempts", &s.attempts)?;
        m.serialize_entry("max_attempts", &s.max_attempts)?;
        m.serialize_entry("ready_at", &time(s.ready_at))?;
        m.serialize_entry("created_at", &time(j.created_at))?;
        m.serialize_entry("finished_at", &s.finished_at.map(time))?;
        m.serialize_entry("unique_key", &j.unique_key)?;
        m.serialize_entry("lease_token", &s.last_token)?;
        m.serialize_entry("lease_expires_at", &lease.map(|l| time(l.expires_at)))?;
        m.serialize_entry("leased_by", &lease.map(|l| l.worker.as_str()))?;
        m.serialize_entry("last_error", &s.last_error)?;
        m.serialize_entry("lease_for_ms", &j.lease_for.map(ms))?;
        m.serialize_entry("timeout_ms", &j.timeout.map(ms))?;
        m.serialize_entry("traceparent", &j.traceparent)?;
        m.serialize_entry("tags", &j.tags)?;
        m.serialize_entry("waiting_on", &s.waiting_on)?;
        bytes_entry(&mut m, "payload", Some(&j.payload), raw)?;
        bytes_entry(&mut m, "result", j.result.as_deref(), raw)?;
        m.end()
    }
}

/// Puts `bytes` under `name` as the JSON they hold (`null` for none or
/// empty): their text as it is when `raw`, else parsed into a value; under
/// `name_base64` when they are not JSON a `Value` can hold.
fn bytes_entry<M: serde::ser::SerializeMap>(
    m: &mut M,
    name: &str,
    bytes: Option<&[u8]>,
    raw: bool,
) -> Result<(), M::Error> {
    let b = bytes.unwrap_or_default();
    if b.is_empty() {
        return m.serialize_entry(name, &());
    }
    // As stored when `raw`: any JSON text, `1e999` and deep nesting
    // included (serde_json checks a raw value without recursing).
    if raw {
        if let Ok(text) = serde_json::from_slice::<&serde_json::value::RawValue>(b) {
            return m.serialize_entry(name, text);
        }
    } else if let Ok(v) = serde_json::from_slice::<Value>(b) {
        return m.serialize_entry(name, &v);
    }
    m.serialize_entry(
        &format!("{name}_base64"),
        &base64::engine::general_purpose::STANDARD.encode(b),
    )
}

/// A leased job, as a worker receives it: `{"id", "token", "queue", "kind",
/// "priority", "attempt", "max_attempts", "lease_expires_at",
/// "lease_for_ms", "timeout_ms", "traceparent", "payload" (or
/// "payload_base64")}`.
pub fn leased(l: &LeasedJob) -> Value {
    serde_json::to_value(Parsed(Leased(l))).unwrap_or_default()
}

/// [`leased`] as a value to serialize straight into an answer, without
/// building a [`Value`]: the payload goes out as the JSON text stored,
/// byte for byte (keys in their order, numbers as written).
#[derive(Debug, Clone, Copy)]
pub struct Leased<'a>(pub &'a LeasedJob);

impl serde::Serialize for Leased<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.write(ser, true)
    }
}

impl serde::Serialize for Parsed<Leased<'_>> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.0.write(ser, false)
    }
}

impl Leased<'_> {
    fn write<S: serde::Serializer>(&self, s: S, raw: bool) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let l = self.0;
        let mut m = s.serialize_map(Some(12))?;
        m.serialize_entry("id", &l.id)?;
        m.serialize_entry("token", &l.token)?;
        m.serialize_entry("queue", &l.queue)?;
        m.serialize_entry("kind", &l.kind)?;
        m.serialize_entry("priority", &l.priority.get())?;
        m.serialize_entry("attempt", &l.attempt)?;
        m.serialize_entry("max_attempts", &l.max_attempts)?;
        m.serialize_entry("lease_expires_at", &time(l.expires_at))?;
        m.serialize_entry("lease_for_ms", &ms(l.lease_for))?;
        m.serialize_entry("timeout_ms", &l.timeout.map(ms))?;
        m.serialize_entry("traceparent", &l.traceparent)?;
        bytes_entry(&mut m, "payload", Some(&l.payload), raw)?;
        m.end()
    }
}

/// `{"queues": {"Q": {"READY": n, ..., "oldest_ready_age_ms": n | null,
/// "paused": bool, "max_leased": n | null, "rate_limit": {"limit": n, "per_ms": n} | null}}}`.
pub fn stats(s: &crate::Stats) -> Value {
    let queues: Map<String, Value> = s
        .queues
        .iter()
        .map(|(q, st)| {
            let mut counts: Map<String, Value> = st
                .counts
                .iter()
                .map(|(k, v)| (k.as_str().to_owned(), json!(v)))
                .collect();
            let age = st
                .oldest_ready_age
                .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            counts.insert("oldest_ready_age_ms".into(), json!(age));
            counts.insert("paused".into(), json!(st.paused));
            counts.extend(limits(&st.limits));
            (q.clone(), Value::Object(counts))
        })
        .collect();
    json!({ "queues": queues })
}

/// `{"jobs": {"READY": n, ...}, "queues": n, "paused": n}`: every queue
/// at once.
pub fn totals(t: &crate::QueueTotals) -> Value {
    let jobs: Map<String, Value> = t
        .counts
        .iter()
        .map(|(k, v)| (k.as_str().to_owned(), json!(v)))
        .collect();
    json!({"jobs": jobs, "queues": t.queues, "paused": t.paused})
}

/// `{"max_leased": n | null, "rate_limit": {"limit": n, "per_ms": n} | null}`.
pub fn limits(l: &relay_core::QueueLimits) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("max_leased".into(), json!(l.max_leased));
    m.insert(
        "rate_limit".into(),
        l.rate.map_or(
            Value::Null,
            |r| json!({"limit": r.limit, "per_ms": u64::try_from(r.per.as_millis()).unwrap_or(u64::MAX)}),
        ),
    );
    m
}

/// A schedule: `{"name", "cron", "tz", "every_ms", "job": {"queue", "kind",
/// "payload" (or "payload_base64"), "priority", "max_attempts"}, "paused",
/// "created_at", "next_at", "last_at"}`.
pub fn schedule(s: &relay_core::Schedule) -> Value {
    serde_json::to_value(Parsed(ScheduleView(s))).unwrap_or_default()
}

/// [`schedule`] as a value to serialize straight into an answer: the
/// payload goes out as the JSON text stored.
#[derive(Debug, Clone, Copy)]
pub struct ScheduleView<'a>(pub &'a relay_core::Schedule);

impl serde::Serialize for ScheduleView<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.write(ser, true)
    }
}

impl serde::Serialize for Parsed<ScheduleView<'_>> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        self.0.write(ser, false)
    }
}

/// The job a schedule enqueues, inside [`ScheduleView`].
struct ScheduledJob<'a>(&'a relay_core::Schedule, bool);

impl serde::Serialize for ScheduledJob<'_> {
    fn serialize<S: serde::Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let s = self.0;
        let mut m = ser.serialize_map(Some(5))?;
        m.serialize_entry("queue", &s.queue)?;
        m.serialize_entry("kind", &s.kind)?;
        bytes_entry(&mut m, "payload", Some(&s.payload), self.1)?;
        m.serialize_entry("priority", &s.priority.get())?;
        m.serialize_entry("max_attempts", &s.max_attempts)?;
        m.end()
    }
}

impl ScheduleView<'_> {
    fn write<S: serde::Serializer>(&self, ser: S, raw: bool) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap as _;
        let s = self.0;
        let (cron, tz, every_ms) = match &s.recurrence {
            relay_core::Recurrence::Cron { expr, tz } => (Some(expr.as_str()), tz.as_deref(), None),
            relay_core::Recurrence::Every(d) => (None, None, Some(ms(*d))),
        };
        let mut m = ser.serialize_map(Some(9))?;
        m.serialize_entry("name", &s.name)?;
        m.serialize_entry("cron", &cron)?;
        m.serialize_entry("tz", &tz)?;
        m.serialize_entry("every_ms", &every_ms)?;
        m.serialize_entry("job", &ScheduledJob(s, raw))?;
        m.serialize_entry("paused", &s.paused)?;
        m.serialize_entry("created_at", &time(s.created_at))?;
        m.serialize_entry("next_at", &time(s.next_at))?;
        m.serialize_entry("last_at", &s.last_at.map(time))?;
        m.end()
    }
}

/// A group of DEAD jobs (`Relay::dead_groups`).
pub fn dead_group(g: &crate::DeadGroup) -> Value {
    json!({"queue": g.queue, "kind": g.kind, "error": g.error, "count": g.count,
        "newest": g.newest, "last_at": time(g.last_at)})
}

/// An event of a job's log: `{"job_id", "seq", "at", "kind", "data"}`.
pub fn event(e: &Event) -> Value {
    json!({"job_id": e.job_id, "seq": e.seq, "at": time(e.at), "kind": e.kind, "data": e.data})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobId, JobStatus, Priority};

    #[test]
    fn bytes_keep_every_byte() {
        let status = JobStatus::new_ready(Timestamp::from_millis(0), 3);
        let mut j = Job {
            id: JobId(7),
            queue: "q".into(),
            kind: "k".into(),
            payload: b"{\"a\":1}".to_vec(),
            priority: Priority::HIGH,
            created_at: Timestamp::from_millis(1_764_442_800_123),
            unique_key: None,
            result: Some(vec![0xff, 0x00]),
            lease_for: None,
            timeout: Some(std::time::Duration::from_secs(90)),
            traceparent: None,
            tags: vec!["vip".into()],
            status,
        };
        let v = job(&j);
        assert_eq!(v["id"], 7);
        assert_eq!(v["state"], "READY");
        assert_eq!(v["payload"], json!({"a": 1}), "JSON bytes are shown as their value");
        assert_eq!(v["result_base64"], "/wA=");
        assert_eq!(v["created_at"], "2025-11-29T19:00:00.123Z");
        j.payload = vec![0x80];
        assert_eq!(job(&j)["payload_base64"], "gA==");
        // A JSON string's text is a string; text that is not JSON is bytes.
        j.payload = b"\"{\\\"a\\\":1}\"".to_vec();
        assert_eq!(job(&j)["payload"], json!("{\"a\":1}"));
        j.payload = b"hello".to_vec();
        let v = job(&j);
        assert_eq!((v.get("payload"), &v["payload_base64"]), (None, &json!("aGVsbG8=")));
        j.payload = Vec::new();
        assert_eq!(job(&j)["payload"], Value::Null);
    }

    /// The serialized views carry the text stored, whatever JSON it is
    /// (`1e999` too); the parsed views ([`job`], [`leased`]) fall back to
    /// base64 for what a `Value` cannot hold.
    #[test]
    fn every_view_shows_every_payload() {
        use crate::{LeaseRequest, NewJob, Relay};
        let relay = Relay::in_memory().unwrap();
        let kept = br#"{"b":1,"a":12345678901234567890123,"b":1E2}"#;
        let odd = br#"{"b":1,"e":1e999}"#;
        for payload in [&kept[..], &odd[..]] {
            relay.submit(NewJob::new("q", "k", payload.to_vec())).unwrap();
        }
        let jobs = relay.lease(LeaseRequest::new(["q"]).max(2)).unwrap();
        for (l, stored) in jobs.iter().zip([&kept[..], &odd[..]]) {
            let job = relay.get(l.id).unwrap();
            let (view, leased) = (super::job(&job), super::leased(l));
            assert_eq!(view["id"], json!(l.id.0), "{view}");
            let (one, lease) = (text(&super::JobView(&job)), text(&super::Leased(l)));
            let stored = format!(r#""payload":{}"#, std::str::from_utf8(stored).unwrap());
            assert!(one.contains(&stored) && lease.contains(&stored), "{one} / {lease}");
            if stored.contains("1e999") {
                assert!(view["payload_base64"].is_string() && leased["payload_base64"].is_string());
            } else {
                assert!(view["payload"].is_object() && leased["payload"].is_object());
            }
        }
    }

    fn text(v: &impl serde::Serialize) -> String {
        serde_json::to_string(v).unwrap()
    }
}
