//! The command line as typed: raw flags, parsed by clap. `main` turns them
//! into calls after checking them (`commands`).

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::time::Duration;

/// Relay: a durable job queue on one SQLite file.
///
/// Exit status: 0 on success; 1 on any error; 2 for bad usage; 3 when a job
/// is not found; 4 when a lease was lost (the token is stale); 5 when the
/// job's state does not allow the action.
#[derive(Debug, Parser)]
#[command(name = "relay", version, propagate_version = true)]
pub struct Cli {
    /// The database: an SQLite file (created if missing) or a postgres:// URL.
    #[arg(
        long,
        global = true,
        env = "RELAY_DB",
        value_name = "PATH",
        help_heading = "Global options"
    )]
    pub db: Option<PathBuf>,

    /// Talk to a Relay server instead of a file (e.g. http://127.0.0.1:7433).
    #[arg(
        long,
        global = true,
        env = "RELAY_SERVER",
        value_name = "URL",
        help_heading = "Global options"
    )]
    pub server: Option<String>,

    /// The server's bearer token: sent with --server, and accepted by
    /// `serve`. (`--token` is always a lease token.)
    #[arg(
        long = "auth",
        global = true,
        env = "RELAY_TOKEN",
        hide_env_values = true,
        value_name = "BEARER",
        help_heading = "Global options"
    )]
    pub bearer: Option<String>,

    /// Print one JSON object per line instead of text.
    #[arg(long, global = true, help_heading = "Global options")]
    pub json: bool,

    /// How long SUCCEEDED jobs are kept after they finish, in queues without
    /// a `relay retention` of their own: a duration (0s, 12h, 30d) or forever.
    /// For the processes that prune a database (`serve`, `work`, `prune`);
    /// give every one of them the same.
    #[arg(long, global = true, env = "RELAY_KEEP_SUCCEEDED", value_name = "DURATION", value_parser = keep, help_heading = "Retention (serve, work and prune on a database; 7d unless set)")]
    pub keep_succeeded: Option<relay::Keep>,

    /// How long DEAD jobs are kept (as --keep-succeeded).
    #[arg(long, global = true, env = "RELAY_KEEP_DEAD", value_name = "DURATION", value_parser = keep, help_heading = "Retention (serve, work and prune on a database; 7d unless set)")]
    pub keep_dead: Option<relay::Keep>,

    /// How long CANCELLED jobs are kept (as --keep-succeeded).
    #[arg(long, global = true, env = "RELAY_KEEP_CANCELLED", value_name = "DURATION", value_parser = keep, help_heading = "Retention (serve, work and prune on a database; 7d unless set)")]
    pub keep_cancelled: Option<relay::Keep>,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Submit a job; prints its id.
    Submit(SubmitArgs),
    /// Lease ready jobs; prints one line per job: id, token, kind, attempt, payload.
    Lease(LeaseArgs),
    /// Acknowledge a leased job: it SUCCEEDED.
    Ack(AckArgs),
    /// Report a failed attempt: the job retries later, or is DEAD when out of attempts.
    Nack(NackArgs),
    /// Extend a lease.
    Extend(ExtendArgs),
    /// Give a leased job back untried (the attempt is not counted); with --in, snooze it.
    Release(ReleaseArgs),
    /// Emit an event: every job waiting for its key (a handler's
    /// `wait_event`) gets the payload and runs on, in this commit. The
    /// first emit of a key stands; the event is kept 7 days, so a wait
    /// that begins later returns it at once.
    Emit(EmitArgs),
    /// Show one job.
    Show(IdArg),
    /// Show a job's event log.
    Events(IdArg),
    /// Count jobs per queue and state (and show which queues are paused).
    Stats,
    /// Pause a queue: none of its jobs is leased until `relay resume` (submits go on).
    Pause(QueueArg),
    /// Resume a paused queue.
    Resume(QueueArg),
    /// Set a queue's limits, across every process on the store (no flags: lift them).
    Limit(LimitArgs),
    /// Show or set how long a queue keeps its finished jobs, by final state
    /// (e.g. `relay retention emails --succeeded 1d --dead forever`). Stored
    /// with the queue and followed by every process; a state it does not
    /// set follows the pruning process's --keep-* (7 days unless set).
    Retention(RetentionArgs),
    /// Show the workers seen in the last hour: alive, gone (their heartbeats
    /// stopped without a word: crashed or killed) or stopped, what each runs
    /// and for how long, and the leases a gone one left until they expire.
    Workers,
    /// Delete now every finished job past its retention, with its events
    /// (the server, and `relay work` on a database, also do this by
    /// themselves, a window of the table at a time). Shows its progress.
    Prune,
    /// Periodic jobs: add, list, remove, pause and resume schedules.
    #[command(subcommand)]
    Schedule(ScheduleCommand),
    /// List jobs, newest first (also `relay list`).
    #[command(visible_alias = "list")]
    Jobs(JobsArgs),
    /// Send any call of the HTTP API by its operation name (as /openapi.json names
    /// it), on a file or a server alike; prints its answer as JSON. E.g. `relay call get 42`,
    /// `relay call list --query state=DEAD`, `relay call pauseQueue emails`.
    Call(CallArgs),
    /// Cancel an unfinished job (not yet SUCCEEDED, DEAD or CANCELLED), or every such job a filter matches.
    Cancel(AdminArgs),
    /// Run a DEAD or CANCELLED job again, or every such job a filter matches
    /// (e.g. `relay retry --queue emails --state DEAD --kind send`).
    Retry(RetryArgs),
    /// Delete a job that is not LEASED, or every such job a filter matches.
    Delete(AdminArgs),
    /// Run a shell command for each job: payload on stdin, exit 0 acks.
    ///
    /// The command gets RELAY_JOB_ID, RELAY_JOB_KIND, RELAY_QUEUE,
    /// RELAY_ATTEMPT, RELAY_LEASE_TOKEN and (when the job has one) RELAY_TRACEPARENT and TRACEPARENT in its environment; stdout (up to --max-result) becomes
    /// the result; on failure the tail of stderr becomes the error. Lines it
    /// writes to file descriptor 3 become progress events. Runs until SIGINT
    /// or SIGTERM (a second one stops at once). With --server it leases over
    /// HTTP (long-poll) and carries on through server outages, retrying with
    /// back-off.
    Work(WorkArgs),
    /// Serve every call over HTTP (JSON), with long-poll leases.
    Serve(ServeArgs),
    /// Create a database, run a few thousand jobs through it and report.
    Demo(DemoArgs),
}

#[derive(Debug, Args)]
pub struct SubmitArgs {
    #[command(flatten)]
    pub job: JobArgs,
    /// Not leased before this long from now (e.g. 10s, 5m, 1h).
    #[arg(long, value_parser = duration, conflicts_with = "run_at")]
    pub delay: Option<Duration>,
    /// Not leased before this moment (RFC 3339, e.g. 2026-12-24T18:00:00Z).
    #[arg(long, value_parser = run_at)]
    pub run_at: Option<relay::Timestamp>,
    /// While a job with this key is unfinished, submitting it again returns that job.
    #[arg(long)]
    pub unique_key: Option<String>,
    /// Makes the submit safe to repeat: for 24 h, submitting with this key
    /// again returns the first submit's job and creates nothing.
    #[arg(long)]
    pub idempotency_key: Option<String>,
    /// At most one job per --unique-key per this period (e.g. 10m): within
    /// it, a throttled submit of the key returns its job even once finished.
    #[arg(long, value_parser = duration)]
    pub throttle: Option<Duration>,
    /// Runs the job this long after the last submit of its --unique-key
    /// (e.g. 30s): while the key's job has not started, a debounced submit
    /// replaces its payload and moves its run time to now + this.
    #[arg(long, value_parser = duration, conflicts_with_all = ["throttle", "delay", "run_at"])]
    pub debounce: Option<Duration>,
    /// Each lease of this job lasts this long, whatever the worker asks (e.g. 10m).
    #[arg(long, value_parser = duration)]
    pub lease_for: Option<Duration>,
    /// Workers give up on an attempt of this job after this long (`relay work` kills the command).
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Wait (WAITING) until these jobs have succeeded: ids, comma-separated or repeated.
    #[arg(long, value_delimiter = ',', allow_negative_numbers = true)]
    pub depends_on: Vec<i64>,
    /// If a job it depends on ends DEAD or CANCELLED: cancel this one, or run it anyway.
    #[arg(long, value_parser = ["cancel", "run"], default_value = "cancel", requires = "depends_on")]
    pub on_dependency_failure: String,
    /// The W3C trace context the job continues, handed to its workers (a
    /// command run by `relay work` gets its job's as TRACEPARENT).
    #[arg(long, env = "TRACEPARENT")]
    pub traceparent: Option<String>,
    /// A label to find the job by (`relay jobs --tag`); repeat for more (at most 8).
    #[arg(long)]
    pub tag: Vec<String>,
}

/// What a job is: for `submit`, and the job a schedule's ticks enqueue.
#[derive(Debug, Args)]
pub struct JobArgs {
    /// The queue (1-64 of A-Z a-z 0-9 _ . -); workers lease by queue.
    #[arg(long, short)]
    pub queue: String,
    /// What the job is: the handler that runs it (e.g. send-email).
    #[arg(long, short)]
    pub kind: String,
    /// 0 (least urgent) to 3 (most urgent).
    #[arg(long, short, default_value_t = 1, allow_negative_numbers = true)]
    pub priority: i64,
    /// Attempts before the job is DEAD (default 20).
    #[arg(allow_negative_numbers = true, long)]
    pub max_attempts: Option<u32>,
    /// The group (a tenant, a customer) the job belongs to: the queue's
    /// claims take groups in turn, and `relay limit --max-leased-per-group`
    /// bounds each group's leases.
    #[arg(long)]
    pub group: Option<String>,
    /// The payload; `-` reads it from stdin. Empty when omitted.
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct LeaseArgs {
    /// A queue to lease from (repeat for several).
    #[arg(long, short, required = true)]
    pub queue: Vec<String>,
    /// Who holds the lease (default: pid-<pid>).
    #[arg(long, short)]
    pub worker: Option<String>,
    /// How long each lease lasts before the job may be leased again (renew with `extend`).
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub lease_for: Duration,
    /// Wait this long for a job when none is ready.
    #[arg(long, value_parser = duration, default_value = "0s")]
    pub wait: Duration,
    /// Lease up to this many jobs.
    #[arg(allow_negative_numbers = true, long, default_value_t = 1)]
    pub max: u32,
}

#[derive(Debug, Args)]
pub struct TokenArgs {
    /// The job's id, as printed by `lease`.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
    /// The lease token printed by `lease`.
    #[arg(long, short, allow_negative_numbers = true)]
    pub token: i64,
}

#[derive(Debug, Args)]
pub struct AckArgs {
    #[command(flatten)]
    pub lease: TokenArgs,
    /// The job's result (kept with it).
    #[arg(long, short)]
    pub result: Option<String>,
}

#[derive(Debug, Args)]
pub struct NackArgs {
    #[command(flatten)]
    pub lease: TokenArgs,
    /// What went wrong (kept as the job's last error).
    #[arg(long, short)]
    pub error: String,
    /// Retry after this long (default: exponential back-off).
    #[arg(long, value_parser = duration)]
    pub retry_in: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct ReleaseArgs {
    #[command(flatten)]
    pub lease: TokenArgs,
    /// Snooze: READY again only after this long (e.g. 10m), with a "snoozed" event.
    #[arg(long = "in", value_name = "DURATION", value_parser = duration)]
    pub snooze_for: Option<Duration>,
}

#[derive(Debug, Args)]
pub struct ExtendArgs {
    #[command(flatten)]
    pub lease: TokenArgs,
    /// The lease's new length, from now.
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub lease_for: Duration,
}

#[derive(Debug, Args)]
pub struct EmitArgs {
    /// The event's key (e.g. `shipped:4242`): name one occurrence, since
    /// only a key's first emit counts.
    pub key: String,
    /// The payload: JSON (as text), or any text; none when left out.
    pub payload: Option<String>,
}

#[derive(Debug, Args)]
pub struct QueueArg {
    /// The queue's name.
    pub queue: String,
}

#[derive(Debug, Subcommand)]
pub enum ScheduleCommand {
    /// Add a schedule (or replace the one of this name): each tick enqueues one job, in every
    /// process together; ticks missed while no Relay ran enqueue one job.
    Add(ScheduleAddArgs),
    /// List the schedules with their next and latest tick.
    List,
    /// Remove a schedule (the jobs it enqueued stay).
    Remove(ScheduleName),
    /// Pause a schedule: its ticks enqueue nothing.
    Pause(ScheduleName),
    /// Resume a schedule from its next tick after now.
    Resume(ScheduleName),
}

#[derive(Debug, Args)]
pub struct ScheduleName {
    /// The schedule's name.
    pub name: String,
}

#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("when").required(true).args(["cron", "every"])))]
pub struct ScheduleAddArgs {
    /// The schedule's name (1-64 of A-Z a-z 0-9 _ . -).
    pub name: String,
    /// A cron expression: five fields, e.g. "*/5 * * * *" (or six, seconds first).
    #[arg(long)]
    pub cron: Option<String>,
    /// The cron expression's time zone, an IANA name (default UTC), e.g. Europe/Berlin.
    #[arg(long)]
    pub tz: Option<String>,
    /// Instead of cron: every this long (1s to 366d), from now.
    #[arg(long, value_parser = duration)]
    pub every: Option<Duration>,
    /// The job each tick enqueues.
    #[command(flatten)]
    pub job: JobArgs,
}

#[derive(Debug, Args)]
pub struct LimitArgs {
    /// The queue's name.
    pub queue: String,
    /// At most this many of the queue's jobs LEASED at once, all workers together.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub max_leased: Option<u32>,
    /// At most this many jobs of one group (`submit --group`) LEASED at once, all workers together.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub max_leased_per_group: Option<u32>,
    /// At most N leases per period: 100/s, 5/min, 1000/h, 20/10s.
    #[arg(long, value_name = "N/PERIOD", value_parser = rate)]
    pub rate: Option<relay::RateLimit>,
    /// A job whose lease expires N times (its handler crashes or hangs its
    /// worker) is DEAD, whatever attempts it has left; 0: expiries alone
    /// never. Like every limit it is replaced: left out, back to 3.
    #[arg(allow_negative_numbers = true, long, value_name = "N")]
    pub poison_after: Option<u32>,
}

#[derive(Debug, Args)]
pub struct RetentionArgs {
    /// The queue's name.
    pub queue: String,
    /// How long its SUCCEEDED jobs are kept: a duration (0s, 12h, 30d),
    /// forever, or default (the pruning process's --keep-succeeded). Left
    /// out: unchanged.
    #[arg(long, value_name = "DURATION", value_parser = keep_arg)]
    pub succeeded: Option<KeepArg>,
    /// How long its DEAD jobs are kept (as --succeeded).
    #[arg(long, value_name = "DURATION", value_parser = keep_arg)]
    pub dead: Option<KeepArg>,
    /// How long its CANCELLED jobs are kept (as --succeeded).
    #[arg(long, value_name = "DURATION", value_parser = keep_arg)]
    pub cancelled: Option<KeepArg>,
}

/// A state's retention as `relay retention` takes it.
#[derive(Debug, Clone, Copy)]
pub enum KeepArg {
    /// `default`: the queue follows the pruning process's default.
    Default,
    /// A duration, or forever.
    Keep(relay::Keep),
}

#[derive(Debug, Args)]
pub struct IdArg {
    /// The job's id.
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
}

/// A retry: one job by id, or every job a filter matches; and whether to
/// forget its steps.
#[derive(Debug, Args)]
pub struct RetryArgs {
    #[command(flatten)]
    pub admin: AdminArgs,
    /// Forget the job's recorded steps, so that every step runs again (a
    /// retry keeps them otherwise: the job goes on after its last recorded
    /// step). One job id only.
    #[arg(long)]
    pub reset_steps: bool,
}

/// One job by id, or (with no id) every job a filter matches.
#[derive(Debug, Args)]
pub struct AdminArgs {
    /// The job's id. Without it, give a filter: the action applies to every
    /// job it matches (100 per transaction, paced so other callers keep
    /// their latency; jobs whose state does not allow it are passed over)
    /// and prints how many it changed.
    #[arg(allow_negative_numbers = true)]
    pub id: Option<i64>,
    #[command(flatten)]
    pub filter: FilterArgs,
}

/// Which jobs: every flag given must hold.
#[derive(Debug, Args, Default)]
pub struct FilterArgs {
    /// Only this queue's jobs.
    #[arg(long, short)]
    pub queue: Option<String>,
    /// WAITING, SCHEDULED, RETRYING, READY, LEASED, SUCCEEDED, DEAD or CANCELLED.
    #[arg(long, short)]
    pub state: Option<String>,
    /// Only jobs of this kind.
    #[arg(long, short)]
    pub kind: Option<String>,
    /// Only jobs carrying this tag.
    #[arg(long)]
    pub tag: Option<String>,
    /// Created at or after: a time ago (30m, 2h, 7d) or an RFC 3339 time.
    #[arg(long, value_parser = when)]
    pub since: Option<When>,
    /// Created before: a time ago (30m, 2h, 7d) or an RFC 3339 time.
    #[arg(long, value_parser = when)]
    pub until: Option<When>,
    /// Whose last error contains this text (case-sensitive).
    #[arg(long)]
    pub error_contains: Option<String>,
}

/// One store: `--db` and `--server` both set is resolved by where each
/// came from. A flag typed on the command line wins over the other from
/// the environment (`export RELAY_DB=jobs.db`, then `relay --server URL
/// stats` talks to the server); both typed, or both from the environment,
/// is refused, saying where each came from.
pub fn one_store(mut cli: Cli, m: &clap::ArgMatches) -> Result<Cli, String> {
    use clap::parser::ValueSource;
    let (Some(db), Some(server)) = (&cli.db, &cli.server) else {
        return Ok(cli);
    };
    let typed = |id: &str| m.value_source(id) == Some(ValueSource::CommandLine);
    match (typed("db"), typed("server")) {
        (true, false) => cli.server = None,
        (false, true) => cli.db = None,
        (both_typed, _) => {
            let (from_db, from_server, hint) = match both_typed {
                true => ("typed", "typed", ""),
                false => ("from RELAY_DB", "from RELAY_SERVER", "; unset one of them"),
            };
            return Err(format!(
                "give --db or --server, not both: --db {} ({from_db}) and --server {server} ({from_server}){hint}",
                db.display()
            ));
        }
    }
    Ok(cli)
}

impl FilterArgs {
    /// True when no flag was given.
    pub fn is_empty(&self) -> bool {
        self.queue.is_none()
            && self.state.is_none()
            && self.kind.is_none()
            && self.tag.is_none()
            && self.since.is_none()
            && self.until.is_none()
            && self.error_contains.is_none()
    }
}

/// A moment given as a time ago or as an RFC 3339 time.
#[derive(Debug, Clone, Copy)]
pub enum When {
    Ago(Duration),
    At(relay::Timestamp),
}

fn when(s: &str) -> Result<When, String> {
    if let Ok(d) = humantime::parse_duration(s) {
        return Ok(When::Ago(d));
    }
    run_at(s)
        .map(When::At)
        .map_err(|_| format!("{s}: write a time ago (30m, 2h, 7d) or an RFC 3339 time (2026-12-24T18:00:00Z)"))
}

#[derive(Debug, Args)]
pub struct JobsArgs {
    #[command(flatten)]
    pub filter: FilterArgs,
    /// At most this many jobs (1-1000).
    #[arg(allow_negative_numbers = true, long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: u32,
    /// The next page: only jobs listed after this one (older, as the list is newest first).
    #[arg(long, value_name = "ID", allow_negative_numbers = true)]
    pub after: Option<i64>,
}

#[derive(Debug, Args)]
pub struct WorkArgs {
    /// A queue to work (repeat for several).
    #[arg(long, short, required = true)]
    pub queue: Vec<String>,
    /// Jobs run at once.
    #[arg(allow_negative_numbers = true, long, short, default_value_t = 1)]
    pub concurrency: usize,
    /// The command, run with /bin/sh -c.
    #[arg(long)]
    pub exec: String,
    /// Kill the command (and everything it started) after this long.
    #[arg(long, value_parser = duration)]
    pub timeout: Option<Duration>,
    /// Lease duration; heartbeats renew it while the command runs.
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub lease_for: Duration,
    /// On SIGINT/SIGTERM, how long running commands get before their jobs are released.
    #[arg(long, value_parser = duration, default_value = "10s")]
    pub grace: Duration,
    /// This worker's name (default: worker-<pid>); its leases name its id,
    /// the name and a random suffix.
    #[arg(long, short)]
    pub worker: Option<String>,
    /// Most bytes of stdout kept as the job's result.
    #[arg(allow_negative_numbers = true, long, default_value_t = 64 * 1024)]
    pub max_result: usize,
    /// How often this worker tells the store it is alive and what it runs
    /// (`relay workers`); it shows as gone three of them after its last.
    #[arg(long, value_parser = duration, default_value = "5s")]
    pub beat_every: Duration,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on: HOST:PORT (localhost:7433, 127.0.0.1:7433, [::1]:7433).
    #[arg(long, default_value = "127.0.0.1:7433", value_parser = listen)]
    pub listen: std::net::SocketAddr,
    /// A file of accepted bearer tokens, one per line (# starts a comment);
    /// the global --auth (or RELAY_TOKEN) is accepted too.
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Allow listening beyond loopback without any token.
    #[arg(long)]
    pub insecure: bool,
    /// Longest a lease request may wait for a job.
    #[arg(long, value_parser = duration, default_value = "60s")]
    pub max_wait: Duration,
    /// Largest request body in bytes.
    #[arg(allow_negative_numbers = true, long, default_value_t = 2 << 20)]
    pub max_body: usize,
    /// After SIGTERM or SIGINT, close connections still open this long
    /// later (a client sending its body slowly) and exit.
    #[arg(long, value_parser = duration, default_value = "20s")]
    pub shutdown_grace: Duration,
    /// Connections open at once; at the limit new ones wait until one
    /// closes (the open-file limit is raised to its hard limit at start).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(1..))]
    pub max_connections: u32,
    /// Close a connection that has not sent a whole request head this long
    /// after it opened or after its last answer (slow or idle peers).
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub header_timeout: Duration,
    /// Answer 408 and close the connection when a request's body has not
    /// arrived whole this long after its head (every route, bulk actions
    /// included): a slow body holds no more than it sent, no longer.
    #[arg(long, value_parser = duration, default_value = "30s")]
    pub body_timeout: Duration,
    /// The dashboard's session cookies carry `Secure`, so browsers send
    /// them over HTTPS only: for a server behind a TLS proxy.
    #[arg(long)]
    pub secure_cookies: bool,
    /// /metrics labels this many queues, those with the most READY jobs;
    /// the rest are summed under queue="(other)".
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub metrics_queues: u32,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Jobs to submit and run.
    #[arg(allow_negative_numbers = true, long, default_value_t = 3000)]
    pub jobs: u32,
    /// Worker threads leasing and acking them.
    #[arg(allow_negative_numbers = true, long, default_value_t = 4)]
    pub workers: u32,
}

fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s).map_err(|e| format!("{e} (write durations like 500ms, 10s, 5m, 1h)"))
}

/// A duration or `forever` (see `Keep`'s `FromStr`).
fn keep(s: &str) -> Result<relay::Keep, String> {
    s.parse()
}

/// `default`, a duration or `forever`.
fn keep_arg(s: &str) -> Result<KeepArg, String> {
    match s.trim() {
        "default" => Ok(KeepArg::Default),
        other => keep(other).map(KeepArg::Keep).map_err(|e| format!("{e}, or default")),
    }
}

/// N/PERIOD (see `RateLimit`'s `FromStr`).
fn rate(s: &str) -> Result<relay::RateLimit, String> {
    s.parse()
}

/// HOST:PORT, the host a name (`localhost`) or an address.
fn listen(s: &str) -> Result<std::net::SocketAddr, String> {
    use std::net::ToSocketAddrs;
    s.to_socket_addrs()
        .map_err(|e| format!("{s}: {e} (write HOST:PORT, e.g. 127.0.0.1:7433 or localhost:7433)"))?
        .next()
        .ok_or_else(|| format!("{s} resolves to no address"))
}

/// An RFC 3339 moment.
fn run_at(s: &str) -> Result<relay::Timestamp, String> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("{s}: {e} (write an RFC 3339 time, e.g. 2026-12-24T18:00:00Z)"))?;
    let millis = t.unix_timestamp_nanos() / 1_000_000;
    i64::try_from(millis)
        .map(relay::Timestamp::from_millis)
        .map_err(|_| format!("{s} is out of range"))
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The call's operation name: submit, get, list, stats, pauseQueue, putSchedule ...
    /// (an unknown name lists them all).
    pub operation: String,
    /// The path's parameter, when the call has one: a job's id, a queue's or a schedule's name.
    pub param: Option<String>,
    /// A field of the call's query (repeat it for more).
    #[arg(long = "query", value_name = "NAME=VALUE")]
    pub query: Vec<String>,
    /// The call's body, as JSON; `-` reads it from standard input.
    #[arg(long, value_name = "JSON")]
    pub body: Option<String>,
}
