//! The table of calls: each call of the API once, with its operation name
//! (as `/openapi.json` names it), method, path, and the types of its path
//! parameter, query, body and answer. The server routes and answers every
//! call from this table, the Rust clients send any call of it
//! ([`crate::Client::send`]), and the CLI reaches every call through it.
//!
//! `/healthz` and `/metrics` are beside it: they answer a status page and
//! Prometheus text, not JSON of the API.

use super as w;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

/// An HTTP method of the API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// A read.
    Get,
    /// A change (or a long-poll).
    Post,
    /// A replacement (limits, a schedule).
    Put,
    /// A removal.
    Delete,
}

impl Method {
    /// Its name, in capitals.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Get => "GET",
            Self::Post => "POST",
            Self::Put => "PUT",
            Self::Delete => "DELETE",
        }
    }
}

/// No query string, or no body: a call that takes none. A POST of it still
/// sends `{}` (a server without tokens refuses a change sent as anything
/// but JSON); the server reads nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Nothing {}

/// What a call's query or body is: given or not, and what the server
/// refuses before reading it into the type.
pub trait Part: Serialize + DeserializeOwned + Send + 'static {
    /// False for [`Nothing`]: the server reads no query or body.
    const GIVEN: bool = true;

    /// True when [`Part::refuse`] has something to say: the server reads
    /// the body as text first.
    const CHECKED: bool = false;

    /// Why a body of this type is refused before it is read, from its JSON
    /// text (a field given as null where leaving it out is the way).
    fn refuse(_raw: &str) -> Option<String> {
        None
    }

    /// Its JSON Schema for `/openapi.json`, with the server's limits
    /// (written in the type, in schemars attributes): generated for the
    /// types the `parts!` list names as such; `None` for [`Nothing`] and
    /// for a body whose rules its type does not tell (one field or
    /// another: the server's document writes those by hand).
    #[cfg(feature = "schema")]
    fn schema(_requests: &mut schemars::SchemaGenerator) -> Option<serde_json::Value> {
        None
    }
}

impl Part for Nothing {
    const GIVEN: bool = false;
}

/// Fields of a JSON object given as `null`, of those named (`None`: any).
/// Keys are read decoded (`"q\u0075eue"` is `queue`); values are not
/// parsed (a payload beside them may be any JSON).
fn nulls(raw: &str, names: Option<&[&str]>) -> Option<String> {
    let fields: std::collections::BTreeMap<String, Box<serde_json::value::RawValue>> =
        serde_json::from_str(raw).ok()?;
    fields
        .into_iter()
        .find(|(k, v)| v.get() == "null" && names.is_none_or(|n| n.contains(&k.as_str())))
        .map(|(k, _)| k)
}

macro_rules! parts {
    (generated: $($t:ty),*; by_hand: $($h:ty),*) => {
        $(impl Part for $t {
            #[cfg(feature = "schema")]
            fn schema(requests: &mut schemars::SchemaGenerator) -> Option<serde_json::Value> {
                Some(requests.subschema_for::<Self>().to_value())
            }
        })*
        $(impl Part for $h {})*
    };
}
parts!(
    generated:
        w::NewJob,
        w::NewJobs,
        w::Lease,
        w::Nack,
        w::Extend,
        w::ReportProgress,
        w::Release,
        w::AppendEvent,
        w::ListQuery,
        w::QueuePage,
        DeadQuery,
        EventsQuery,
        RetryQuery,
        ResultQuery,
        w::CreateToken,
        WorkersQuery,
        w::Heartbeat,
        w::Limits,
        w::Retention,
        w::PruneFrom,
        w::WorkerBeat;
    by_hand: w::Ack, w::Work, w::RecordStep, w::EmitEvent
);

impl Part for w::Bulk {
    const CHECKED: bool = true;

    /// A filter field given as null is refused, not read as absent: a
    /// filter that turned out empty would act on every job.
    fn refuse(raw: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Of {
            filter: Option<Box<serde_json::value::RawValue>>,
        }
        let f = serde_json::from_str::<Of>(raw).ok()?.filter?;
        nulls(f.get(), None).map(|k| format!("filter.{k} is null: leave it out instead"))
    }
}

impl Part for w::NewSchedule {
    const CHECKED: bool = true;

    /// `cron`, `tz` and `every_ms` are given or left out, never null (one
    /// of cron and every_ms names the kind of schedule).
    fn refuse(raw: &str) -> Option<String> {
        nulls(raw, Some(&["cron", "tz", "every_ms"])).map(|k| format!("{k} is null: leave it out instead"))
    }
}

/// `GET /v1/dead`'s query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DeadQuery {
    /// At most this many groups (1-1000; 100 when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub limit: Option<u32>,
}

/// `GET /v1/jobs/{id}/events`'s query: a page of the job's events.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct EventsQuery {
    /// Events after this `seq` (the previous page's `next`; from the first
    /// when left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0)))]
    pub after: Option<i64>,
    /// At most this many (1-1000; 1000 when left out). A page also stops
    /// at 4 MiB of events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub limit: Option<u32>,
}

/// `POST /v1/jobs/{id}/retry`'s query.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RetryQuery {
    /// Forget the job's recorded steps (and any wait), so that every step
    /// runs again; left out, a retry keeps them and the job goes on after
    /// its last recorded step.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub reset_steps: bool,
}

/// `GET /v1/jobs/{id}/result`'s query: how long to wait for the job's end.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ResultQuery {
    /// Wait up to this long for the job to end (the server waits at most
    /// its `--max-wait`, then answers: ask again); answer at once when left
    /// out or 0.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 0, max = super::MAX_MS)))]
    pub wait_ms: Option<u64>,
}

/// `GET /v1/workers`'s query: a page of the workers.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkersQuery {
    /// Workers after this id (the previous page's `next`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[A-Za-z0-9_.-]{0,64}$")))]
    pub after: Option<String>,
    /// At most this many (1-1000; 1000 when left out). A page also stops
    /// at 4 MiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 1000)))]
    pub limit: Option<u32>,
}

/// A call's path parameter: none (`()`), a job's id (`i64`), or a queue's
/// or schedule's name (`String`).
pub trait PathParam: Sized + Send + 'static {
    /// As one path segment (percent-encoded); none for `()`.
    fn segment(&self) -> Option<String>;

    /// From the path's segment, decoded.
    ///
    /// # Errors
    ///
    /// What the server answers (400) when it does not parse.
    fn parse(raw: Option<String>) -> Result<Self, String>;
}

impl PathParam for () {
    fn segment(&self) -> Option<String> {
        None
    }

    fn parse(_: Option<String>) -> Result<Self, String> {
        Ok(())
    }
}

impl PathParam for i64 {
    fn segment(&self) -> Option<String> {
        Some(self.to_string())
    }

    fn parse(raw: Option<String>) -> Result<Self, String> {
        let raw = raw.unwrap_or_default();
        raw.parse()
            .map_err(|_| format!("{raw:?} is not a job id (a positive integer)"))
    }
}

impl PathParam for String {
    fn segment(&self) -> Option<String> {
        Some(segment(self))
    }

    fn parse(raw: Option<String>) -> Result<Self, String> {
        Ok(raw.unwrap_or_default())
    }
}

/// `s` as one path segment: anything but A-Z a-z 0-9 _ . - is
/// percent-encoded (a bad name then reaches the server whole, and its
/// error names it).
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// One call of the API. Each is a type of this module, named after its
/// operation ([`Submit`], [`Ack`], ...), listed in [`CALLS`].
pub trait Call: Send + 'static {
    /// Its `operationId` in `/openapi.json`.
    const OPERATION: &'static str;
    /// Its method.
    const METHOD: Method;
    /// Its path, with `{id}`, `{queue}` or `{name}` for its parameter.
    const PATH: &'static str;
    /// Its status when it succeeds (201 for what it creates).
    const STATUS: u16;
    /// The statuses of its own errors (every call may also answer 401
    /// and 503).
    const ERRORS: &'static [u16];
    /// What it does, for people (its documentation in `/openapi.json`).
    const DESCRIPTION: &'static str;
    /// Its path parameter.
    type Param: PathParam;
    /// Its query string.
    type Query: Part;
    /// Its body.
    type Body: Part;
    /// What it answers.
    type Answer: Serialize + DeserializeOwned + Send + 'static;

    /// Its path parameter's name in [`Call::PATH`] (`id`, `queue`,
    /// `name`), when it has one.
    fn param_name() -> Option<&'static str> {
        Self::PATH
            .split_once('{')
            .and_then(|(_, rest)| rest.split_once('}'))
            .map(|(n, _)| n)
    }

    /// The path with `param` in it.
    fn path(param: &Self::Param) -> String {
        match (param.segment(), Self::param_name()) {
            (Some(seg), Some(name)) => Self::PATH.replacen(&format!("{{{name}}}"), &seg, 1),
            _ => Self::PATH.to_owned(),
        }
    }
}

/// A call as data: what [`CALLS`] lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CallInfo {
    /// Its `operationId`.
    pub operation: &'static str,
    /// Its method.
    pub method: Method,
    /// Its path template.
    pub path: &'static str,
}

macro_rules! calls {
    ($(
        $(#[doc = $doc:literal])*
        $name:ident = $op:literal: $method:ident $path:literal
            ($param:ty, $query:ty, $body:ty) -> $answer:ty, $status:literal, [$($error:literal),*];
    )*) => {
        $(
            $(#[doc = $doc])*
            #[derive(Debug, Clone, Copy)]
            pub struct $name;

            impl Call for $name {
                const OPERATION: &'static str = $op;
                const METHOD: Method = Method::$method;
                const PATH: &'static str = $path;
                const STATUS: u16 = $status;
                const ERRORS: &'static [u16] = &[$($error),*];
                const DESCRIPTION: &'static str = concat!($($doc, "\n"),*);
                type Param = $param;
                type Query = $query;
                type Body = $body;
                type Answer = $answer;
            }
        )*

        /// Every call of the table.
        pub const CALLS: &[CallInfo] = &[$(CallInfo { operation: $op, method: Method::$method, path: $path }),*];

        /// Runs `$m!` on the table's call types: `$m! { Submit, List, ... }`
        /// (the server builds its router with it).
        #[macro_export]
        #[doc(hidden)]
        macro_rules! for_each_call {
            ($m:ident) => { $m! { $($name),* } };
        }
    };
}

calls! {
    /// Submits a job. Durable when answered: 201 with its id, or 200 with
    /// `existing` when an unfinished job holds its unique key or an earlier
    /// submit carried its idempotency key (nothing written).
    Submit = "submit": Post "/v1/jobs" ((), Nothing, w::NewJob) -> w::Submitted, 201, [400, 404, 413];
    /// Jobs that match every filter given, newest first, a page at a time:
    /// follow `next` as `before`.
    List = "list": Get "/v1/jobs" ((), w::ListQuery, Nothing) -> w::JobPage, 200, [400];
    /// Submits 1-10,000 jobs in one transaction, all or none.
    SubmitBatch = "submitBatch": Post "/v1/jobs/batch" ((), Nothing, w::NewJobs) -> w::SubmittedBatch, 201, [400, 404, 413];
    /// Retries, cancels or deletes every job the filter matches (jobs whose
    /// state does not allow it are passed over), 100 per transaction, paced
    /// so other callers keep their latency (never cut off by the request
    /// timeout); answers how many it changed.
    Bulk = "bulk": Post "/v1/jobs/bulk" ((), Nothing, w::Bulk) -> w::BulkDone, 200, [400];
    /// The newest 10,000 DEAD jobs grouped by queue, kind and the first line
    /// of their error, the largest groups first (a group's count is of
    /// those; /v1/stats counts every DEAD job).
    DeadGroups = "deadGroups": Get "/v1/dead" ((), DeadQuery, Nothing) -> w::DeadGroups, 200, [400];
    /// One job, with its payload and result.
    Get = "get": Get "/v1/jobs/{id}" (i64, Nothing, Nothing) -> w::Job, 200, [400, 404];
    /// Awaits a job's end: the job (as `GET /v1/jobs/{id}` answers it) once
    /// it is SUCCEEDED, DEAD or CANCELLED, or as it is when `wait_ms` ran
    /// out first (its `state` says which). A long-poll woken by the commit
    /// that ends the job.
    JobResult = "result": Get "/v1/jobs/{id}/result" (i64, ResultQuery, Nothing) -> w::Job, 200, [400, 404, 429];
    /// Deletes a job that is not LEASED, with its events.
    Delete = "delete": Delete "/v1/jobs/{id}" (i64, Nothing, Nothing) -> w::Changed, 200, [400, 404, 409];
    /// Reports that a leased job succeeded, with its result. Repeating it
    /// with the same token answers success again.
    Ack = "ack": Post "/v1/jobs/{id}/ack" (i64, Nothing, w::Ack) -> w::Changed, 200, [400, 404, 409, 413];
    /// Reports that a leased job failed: READY again after `retry_in_ms` (or
    /// the back-off), DEAD when its attempts are spent or `permanent`.
    Nack = "nack": Post "/v1/jobs/{id}/nack" (i64, Nothing, w::Nack) -> w::Changed, 200, [400, 404, 409, 413];
    /// Extends a lease to `lease_for_ms` from now.
    Extend = "extend": Post "/v1/jobs/{id}/extend" (i64, Nothing, w::Extend) -> w::Changed, 200, [400, 404, 409, 413];
    /// Reports how far along a leased job is (its holder only): kept on the
    /// job (`progress` in its answers) and logged as a "progress" event.
    Progress = "progress": Post "/v1/jobs/{id}/progress" (i64, Nothing, w::ReportProgress) -> w::Changed, 200, [400, 404, 409, 413];
    /// Records the output of a step of a leased job (its holder only): kept
    /// on the job (`steps` in its answers) and given with every later lease
    /// of it, so a new attempt does not run the step again. The first
    /// record of a name stands (`recorded: false` answers it); 409
    /// `step_bound` past a job's 1,000 steps or 1 MiB of output.
    RecordStep = "recordStep": Post "/v1/jobs/{id}/steps" (i64, Nothing, w::RecordStep) -> w::StepRecorded, 200, [400, 404, 409, 413];
    /// Emits an event: every job waiting for its key has the payload
    /// recorded and is READY, in this commit; the event is kept 7 days, so
    /// a wait that begins later returns it at once. The first emit of a
    /// key stands (`first: false` answers a later one, which changes
    /// nothing). A payload is at most 64 KiB.
    Emit = "emit": Post "/v1/events/{key}" (String, Nothing, w::EmitEvent) -> w::Emitted, 200, [400, 413];
    /// Makes a completion token for the lease's holder: a human or a third
    /// party completes it once, without an API token, with `POST
    /// /v1/tokens/{token}/complete`, which wakes the job waiting for its
    /// `key`. Refused 409 `lease_lost` for a stale token.
    CreateToken = "createToken": Post "/v1/jobs/{id}/tokens" (i64, Nothing, w::CreateToken) -> w::TokenCreated, 201, [400, 404, 409, 413];
    /// Gives a leased job back untried (the attempt is not counted): READY
    /// at once, or with `in_ms`, snoozed: READY again after that long, with
    /// a "snoozed" event.
    Release = "release": Post "/v1/jobs/{id}/release" (i64, Nothing, w::Release) -> w::Changed, 200, [400, 404, 409, 413];
    /// Cancels a READY, WAITING or LEASED job.
    Cancel = "cancel": Post "/v1/jobs/{id}/cancel" (i64, Nothing, Nothing) -> w::Changed, 200, [400, 404, 409];
    /// Runs a DEAD or CANCELLED job again: its recorded steps are kept (it
    /// goes on after the last one) unless `reset_steps=true`.
    Retry = "retry": Post "/v1/jobs/{id}/retry" (i64, RetryQuery, Nothing) -> w::Changed, 200, [400, 404, 409];
    /// A job's event log, oldest first.
    Events = "events": Get "/v1/jobs/{id}/events" (i64, EventsQuery, Nothing) -> w::Events, 200, [400, 404];
    /// Appends an event of the caller's own to a job's log.
    AppendEvent = "appendEvent": Post "/v1/jobs/{id}/events" (i64, Nothing, w::AppendEvent) -> w::Appended, 201, [400, 404, 413];
    /// Leases up to `max` ready jobs; with `wait_ms`, waits for one (woken
    /// at once by a submit).
    Lease = "lease": Post "/v1/lease" ((), Nothing, w::Lease) -> w::Leased, 200, [400, 413, 429];
    /// A worker's turn in one call: records `outcomes` (each answered on its
    /// own: a stale token fails only its item), then leases as `lease` asks,
    /// in the same transaction and commit. `lease.wait_ms` is honoured only
    /// when there are no outcomes. Sending the same call again after a lost
    /// answer is safe for its outcomes (a repeated ack answers its state
    /// again).
    Work = "work": Post "/v1/work" ((), Nothing, w::Work) -> w::Worked, 200, [400, 413, 429];
    /// Extends many leases at once, each to its `lease_for_ms` (else the
    /// call's, else 30 s) from now; each answered on its own (`lease_lost`,
    /// `invalid_state`, `not_found`: the job is no longer held).
    Heartbeat = "heartbeat": Post "/v1/heartbeat" ((), Nothing, w::Heartbeat) -> w::Beaten, 200, [400, 413];
    /// A page of queues' stats, by name in byte order (1,000 at most), so
    /// that no answer grows with the number of queues: follow `next` as
    /// `after`. The first page (no `after`) carries `totals` over every
    /// queue.
    Stats = "stats": Get "/v1/stats" ((), w::QueuePage, Nothing) -> w::Stats, 200, [400];
    /// A page of queue names (with jobs, paused or limited), in byte order,
    /// 1,000 at most: follow `next` as `after`.
    Queues = "queues": Get "/v1/queues" ((), w::QueuePage, Nothing) -> w::QueueNames, 200, [400];
    /// One queue: its jobs by state, the age of its oldest due job, whether
    /// it is paused, and its limits (every count zero for a queue nothing
    /// has used).
    GetQueue = "getQueue": Get "/v1/queues/{queue}" (String, Nothing, Nothing) -> w::QueueInfo, 200, [400];
    /// Pauses the queue: from the next claim on, in every process on the
    /// store, none of its jobs is leased; submits and completions go on.
    /// Stored; pausing a paused queue changes nothing.
    PauseQueue = "pauseQueue": Post "/v1/queues/{queue}/pause" (String, Nothing, Nothing) -> w::QueuePaused, 200, [400];
    /// Resumes a paused queue and wakes lessees waiting for it.
    ResumeQueue = "resumeQueue": Post "/v1/queues/{queue}/resume" (String, Nothing, Nothing) -> w::QueuePaused, 200, [400];
    /// Replaces the queue's limits, enforced across every process on the
    /// store: at most `max_leased` of its jobs LEASED at once, at most
    /// `rate_limit.limit` leases per `rate_limit.per_ms`. A field left out
    /// or null lifts that limit.
    SetQueueLimits = "setQueueLimits": Put "/v1/queues/{queue}/limits" (String, Nothing, w::Limits) -> w::QueueLimits, 200, [400, 413];
    /// The queue's own retention and what the prune keeps of it (its own,
    /// else the server's default), by final state.
    GetRetention = "getRetention": Get "/v1/queues/{queue}/retention" (String, Nothing, Nothing) -> w::QueueRetention, 200, [400];
    /// Replaces how long the queue keeps its finished jobs, by final state:
    /// milliseconds after a job finished, or "forever"; a state left out or
    /// null follows the server's default. The prune follows it from its
    /// next pass, for jobs that finished before too.
    SetRetention = "setRetention": Put "/v1/queues/{queue}/retention" (String, Nothing, w::Retention) -> w::QueueRetention, 200, [400, 413];
    /// One pass of the prune now: reads the 5,000 jobs after `after` and
    /// deletes, with their events, the finished ones past their queue's
    /// retention (at most 1,000). Follow `next` as `after` until it is
    /// null to go through every job (`relay prune` does). The server also
    /// prunes by itself.
    Prune = "prune": Post "/v1/prune" ((), Nothing, w::PruneFrom) -> w::Pruned, 200, [400, 413];
    /// A worker's heartbeat: registers it the first time, then says it is
    /// alive and what it runs (the runtimes send one every 5 s); its last
    /// says it stopped. `{worker}` is the worker's id, its own, unique to
    /// its run (1-64 of A-Z a-z 0-9 _ . -).
    PutWorker = "putWorker": Put "/v1/workers/{worker}" (String, Nothing, w::WorkerBeat) -> w::WorkerSeen, 200, [400, 403, 413];
    /// Every worker seen in the last hour, by id: alive, gone (its
    /// heartbeats stopped without a word) or stopped, what each runs and
    /// since when, and the leases a gone one left orphaned until they
    /// expire.
    Workers = "workers": Get "/v1/workers" ((), WorkersQuery, Nothing) -> w::Workers, 200, [400];
    /// Every schedule of periodic jobs, by name.
    Schedules = "schedules": Get "/v1/schedules" ((), Nothing, Nothing) -> w::Schedules, 200, [];
    /// Adds a schedule of periodic jobs, or replaces the one of this name
    /// (keeping its paused state). Each tick enqueues exactly one job,
    /// whichever process runs the scheduler; ticks missed while no Relay
    /// ran enqueue one job.
    PutSchedule = "putSchedule": Put "/v1/schedules/{name}" (String, Nothing, w::NewSchedule) -> w::Schedule, 200, [400, 413];
    /// One schedule of periodic jobs: its job, cron or interval, time zone,
    /// paused state, and next and latest tick.
    GetSchedule = "getSchedule": Get "/v1/schedules/{name}" (String, Nothing, Nothing) -> w::Schedule, 200, [400, 404];
    /// Removes a schedule.
    RemoveSchedule = "removeSchedule": Delete "/v1/schedules/{name}" (String, Nothing, Nothing) -> w::ScheduleRemoved, 200, [400, 404];
    /// Pauses a schedule: its ticks enqueue nothing until it is resumed.
    PauseSchedule = "pauseSchedule": Post "/v1/schedules/{name}/pause" (String, Nothing, Nothing) -> w::Schedule, 200, [400, 404];
    /// Resumes from the next tick after now (ticks missed while paused
    /// enqueue nothing).
    ResumeSchedule = "resumeSchedule": Post "/v1/schedules/{name}/resume" (String, Nothing, Nothing) -> w::Schedule, 200, [400, 404];
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A bulk filter's field given as null is refused however its key is
    /// written (an escaped `queue` was passed over once, and the filter
    /// then took every queue).
    #[test]
    fn a_null_filter_field_is_refused_whatever_its_key_spelling() {
        for raw in [
            r#"{"action":"delete","filter":{"state":"DEAD","queue":null}}"#,
            r#"{"action":"delete","filter":{"state":"DEAD","q\u0075eue":null}}"#,
        ] {
            assert_eq!(
                <w::Bulk as Part>::refuse(raw).as_deref(),
                Some("filter.queue is null: leave it out instead"),
                "{raw}"
            );
        }
        let fine = r#"{"action":"delete","filter":{"state":"DEAD","queue":"q"}}"#;
        assert_eq!(<w::Bulk as Part>::refuse(fine), None);
        let schedule = r#"{"cron":"* * * * *","t\u007a":null,"job":{"queue":"q","kind":"k","payload":{"e":1e999}}}"#;
        assert_eq!(
            <w::NewSchedule as Part>::refuse(schedule).as_deref(),
            Some("tz is null: leave it out instead")
        );
    }

    /// An answer with a state this build does not know is still read; a
    /// request naming one is refused.
    #[test]
    fn an_unknown_state_reads_in_answers_and_is_refused_in_requests() {
        let changed: w::Changed = serde_json::from_str(r#"{"id":1,"state":"PAUSED"}"#).unwrap();
        assert_eq!(changed.state, Some(w::State::Other));
        let known: w::Changed = serde_json::from_str(r#"{"id":1,"state":"dead"}"#).unwrap();
        assert_eq!(known.state, Some(w::State::Dead));
        let refused = serde_json::from_str::<w::Filter>(r#"{"state":"PAUSED"}"#).unwrap_err();
        assert!(refused.to_string().starts_with("unknown state \"PAUSED\""), "{refused}");
        let read: w::Filter = serde_json::from_str(r#"{"state":"ready"}"#).unwrap();
        assert_eq!(read.state, Some(w::State::Ready));
    }
}
