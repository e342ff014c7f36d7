//! Workers as they describe themselves: `PUT /v1/workers/{id}` (a
//! heartbeat) and `GET /v1/workers`.

use serde::{Deserialize, Serialize};

/// `PUT /v1/workers/{id}`: a worker's heartbeat, sent when it starts and
/// every `beat_every_ms` after, with the jobs it runs; its last says
/// `stopped`. Each is whole: the server keeps the latest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WorkerBeat {
    /// The lease holder's name it leases under (1-64 characters).
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{1,64}$")))]
    pub name: String,
    /// The host it runs on.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{0,255}$")))]
    pub host: String,
    /// Its process id.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(max = 4_294_967_295u32)))]
    pub pid: u32,
    /// The queues it works (at most 64).
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(max = 64), inner(pattern(r"^[A-Za-z0-9_.-]{1,64}$")))
    )]
    pub queues: Vec<String>,
    /// How many jobs it runs at once.
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 4_294_967_295u32)))]
    pub concurrency: u32,
    /// Its runtime and version, e.g. `relay-python 0.1.0`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(pattern(r"^[^\u0000-\u001f\u007f-\u009f]{0,255}$")))]
    pub version: String,
    /// When it started (RFC 3339).
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub started_at: String,
    /// How often it sends its heartbeat, in milliseconds (100-600,000): it
    /// is gone three of them (and a second) after its last.
    #[cfg_attr(feature = "schema", schemars(range(min = 100, max = 600_000)))]
    pub beat_every_ms: u64,
    /// The jobs it runs now (at most 4,096).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(max = 4096)))]
    pub running: Vec<RunningJob>,
    /// Its last heartbeat: it stopped (its running jobs are ignored).
    #[serde(default)]
    pub stopped: bool,
    /// The secret this worker's first heartbeat was answered with
    /// ([`WorkerSeen::secret`]): every later heartbeat of the id carries
    /// it, and one without it (or with another) is refused with 403, so
    /// no other client can write this worker's record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 128)))]
    pub secret: Option<String>,
}

/// A job a worker runs: its lease, and since when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RunningJob {
    /// The job.
    pub id: i64,
    /// The lease's token.
    pub token: i64,
    /// When its handler started (RFC 3339).
    #[cfg_attr(feature = "schema", schemars(extend("format" = "date-time")))]
    pub since: String,
}

/// A heartbeat recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkerSeen {
    /// The worker.
    pub id: String,
    /// Whether it stopped.
    pub stopped: bool,
    /// On the heartbeat that made the record: the secret every later
    /// heartbeat of this id must carry ([`WorkerBeat::secret`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// `GET /v1/workers`: every worker seen in the last hour, by id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Workers {
    /// The workers, by id: a page of at most the query's `limit` and
    /// 4 MiB.
    pub workers: Vec<Worker>,
    /// The next page's `after`; none on the last page.
    #[serde(default)]
    pub next: Option<String>,
}

/// A worker as the server knows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Worker {
    /// Its id, chosen by the worker.
    pub id: String,
    /// `alive`; `gone`: its heartbeats stopped without a word (it crashed
    /// or was killed), its leases orphaned until they expire; `stopped`.
    pub state: WorkerState,
    /// The lease holder's name it leases under.
    pub name: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The queues it works.
    pub queues: Vec<String>,
    /// How many jobs it runs at once.
    pub concurrency: u32,
    /// Its runtime and version.
    pub version: String,
    /// When it started.
    pub started_at: String,
    /// How often it sends its heartbeat.
    pub beat_every_ms: u64,
    /// When its latest heartbeat was recorded.
    pub seen_at: String,
    /// When it said it stopped.
    pub stopped_at: Option<String>,
    /// The jobs its latest heartbeat says it runs.
    pub running: Vec<RunningJob>,
    /// For a gone worker: those of its jobs still LEASED under the lease it
    /// ran them with; nobody runs them until the lease expires.
    pub orphaned: Vec<OrphanedLease>,
}

/// A worker's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum WorkerState {
    /// Its heartbeats come.
    Alive,
    /// Its heartbeats stopped without a word.
    Gone,
    /// It said it stopped.
    Stopped,
}

/// A lease a gone worker left.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct OrphanedLease {
    /// The job.
    pub id: i64,
    /// The lease's token.
    pub token: i64,
    /// When the worker started it.
    pub since: String,
    /// When the lease expires (the job is then leased again, or DEAD).
    pub expires_at: String,
}
