//! Each subcommand: check what the flags say, make the library call, print.

use crate::args::{AdminArgs, Cli, Command, FilterArgs, JobArgs, KeepArg, ScheduleCommand, SubmitArgs};
use crate::error::CliError;
use crate::output::Out;
use crate::target::{Admin, Lease, Remote, Submit, Target, When};
use relay::{Clock, Error, JobFilter, JobId, LeaseToken, Relay, StoreUrl, Timestamp};
use relay_client::wire;
use std::io::Read;
use std::path::PathBuf;

pub fn run(cli: Cli) -> Result<(), CliError> {
    let out = Out::new(cli.json);
    let options = relay::Options {
        retention: relay::Retention {
            succeeded: cli.keep_succeeded,
            dead: cli.keep_dead,
            cancelled: cli.keep_cancelled,
        },
        // Only the long-running processes prune by themselves; a one-shot
        // command prunes by nobody's defaults (`relay prune` does, when
        // asked).
        prune: matches!(cli.command, Command::Serve(_) | Command::Work(_)),
        ..relay::Options::default()
    };
    match cli.command {
        Command::Demo(_) if cli.server.is_some() => return Err(CliError::Usage(
            "relay demo runs on a database file of its own (--db PATH, or a temporary one); it does not use --server"
                .into(),
        )),
        Command::Demo(args) => return crate::demo::run(cli.db, &args, &out),
        Command::Work(a) => {
            // One of them at most: `args::one_store` resolved both.
            return match (&cli.server, cli.db) {
                (Some(url), _) => crate::work::run_remote(Remote::new(url, cli.bearer.clone())?, a, &out),
                (None, db) => crate::work::run(open(db, options)?, a, &out),
            };
        }
        Command::Serve(a) => {
            return crate::serve::run(local(cli.db, cli.server.as_deref(), "serve", options)?, a, cli.bearer)
        }
        _ => {}
    }
    let target = match (&cli.server, &cli.db) {
        (Some(url), _) => Target::Remote(Remote::new(url, cli.bearer.clone())?),
        (None, db) => {
            if !writes(&cli.command) {
                must_exist(db.as_deref())?;
            }
            Target::Local(
                relay_server::Local::new(open(cli.db.clone(), options)?).map_err(|e| CliError::Io(e.to_string()))?,
            )
        }
    };
    dispatch(&target, cli.command, &out)
}

fn dispatch(t: &Target, command: Command, out: &Out) -> Result<(), CliError> {
    match command {
        Command::Submit(a) => {
            let found = match (&a.idempotency_key, &a.throttle, &a.debounce) {
                (Some(_), _, _) => "was submitted with this idempotency key (or holds its unique key)",
                (None, Some(_), _) => "holds this unique key (unfinished, or throttled for its period)",
                (None, None, Some(_)) => {
                    "holds this unique key (debounced: its payload and run time replaced, unless it has started)"
                }
                (None, None, None) => "(unfinished) already holds this unique key",
            };
            out.submitted(&t.submit(submit_args(a)?)?, found)
        }
        Command::Lease(a) => {
            let lease = Lease {
                queues: a.queue,
                worker: a.worker,
                lease_for: a.lease_for,
                wait: a.wait,
                max: a.max,
            };
            let queues = lease.queues.clone();
            let leased = t.lease(lease)?;
            if leased.is_empty() {
                // Nothing to print is not silence: say so, and name a
                // queue that has never had a job (a typo, most often).
                if out.is_json() {
                    out.line("[]");
                }
                eprintln!(
                    "relay: no job to lease in {}{}",
                    queues.join(", "),
                    unknown_queues(t, &queues)
                );
            }
            leased.iter().for_each(|l| out.leased(l));
        }
        Command::Ack(a) => out.changed(&t.ack(JobId(a.lease.id), LeaseToken(a.lease.token), a.result)?),
        Command::Nack(a) => out.changed(&t.nack(JobId(a.lease.id), LeaseToken(a.lease.token), a.error, a.retry_in)?),
        Command::Extend(a) => out.changed(&t.extend(JobId(a.lease.id), LeaseToken(a.lease.token), a.lease_for)?),
        Command::Release(a) => out.changed(&t.admin(
            JobId(a.lease.id),
            Admin::Release(LeaseToken(a.lease.token), a.snooze_for),
        )?),
        Command::Cancel(a) => admin_or_bulk(t, a, Admin::Cancel, wire::BulkAction::Cancel, out)?,
        Command::Retry(a) if a.reset_steps => {
            match (a.admin.id, a.admin.filter.is_empty()) {
                (Some(id), true) => out.changed(&t.admin(JobId(id), Admin::RetryResetSteps)?),
                _ => return Err(CliError::Usage(
                    "`relay retry --reset-steps` takes one job id, no filter (a retry by filter keeps the jobs' steps)"
                        .into(),
                )),
            }
        }
        Command::Retry(a) => admin_or_bulk(t, a.admin, Admin::Retry, wire::BulkAction::Retry, out)?,
        Command::Delete(a) => admin_or_bulk(t, a, Admin::Delete, wire::BulkAction::Delete, out)?,
        Command::Show(a) => out.job(&t.show(JobId(a.id))?),
        Command::Events(a) => t.events(JobId(a.id), |page| out.events(page))?,
        Command::Stats => {
            // A page at a time: memory stays bounded however many queues.
            let mut after = None;
            let mut header = true;
            loop {
                let page = t.stats_page(after.take())?;
                out.stats(&page, header);
                header = false;
                match page.next {
                    Some(next) => after = Some(next),
                    None => break,
                }
            }
        }
        Command::Emit(a) => out.emitted(&a.key, &t.emit(&a.key, a.payload.as_deref().unwrap_or("").as_bytes())?),
        Command::Pause(a) => {
            // A queue nothing has used yet is paused all the same (its jobs
            // wait once they come), but a typo should not pass unseen.
            let unknown = unknown_queues(t, std::slice::from_ref(&a.queue));
            out.queue(&t.pause(&a.queue, true)?);
            if !unknown.is_empty() {
                eprintln!("relay: note{unknown}; it is paused for the jobs to come");
            }
        }
        Command::Resume(a) => out.queue(&t.pause(&a.queue, false)?),
        Command::Schedule(c) => schedule(t, c, out)?,
        Command::Limit(a) => {
            let limits = relay::QueueLimits {
                max_leased_per_group: a.max_leased_per_group,
                max_leased: a.max_leased,
                rate: a.rate,
                poison_after: a.poison_after,
            };
            out.limits(&t.set_limits(&a.queue, limits)?);
        }
        Command::Retention(a) => {
            let mut own = t.retention(&a.queue)?.own;
            let given = [
                (a.succeeded, &mut own.succeeded),
                (a.dead, &mut own.dead),
                (a.cancelled, &mut own.cancelled),
            ];
            let mut set = false;
            for (arg, field) in given {
                if let Some(arg) = arg {
                    *field = match arg {
                        KeepArg::Default => None,
                        KeepArg::Keep(k) => Some(relay::wire::keep(k)),
                    };
                    set = true;
                }
            }
            let now = if set {
                t.set_retention(&a.queue, own)?
            } else {
                t.retention(&a.queue)?
            };
            out.retention(&now);
        }
        Command::Workers => {
            let mut first = true;
            t.workers(|page| {
                out.workers_page(page, first);
                first = false;
            })?;
        }
        Command::Prune => {
            let mut after = 0;
            let mut deleted = 0;
            let started = std::time::Instant::now();
            let mut shown = started;
            loop {
                let pass = t.prune_from(after)?;
                deleted += pass.deleted;
                match pass.next {
                    Some(next) => after = next,
                    None => break,
                }
                if shown.elapsed() >= std::time::Duration::from_secs(1) {
                    shown = std::time::Instant::now();
                    eprintln!("relay prune: {deleted} deleted so far, at job {after}...");
                }
            }
            out.pruned(deleted, started.elapsed());
        }
        Command::Jobs(a) => {
            let filter = JobFilter {
                limit: a.limit,
                before: a.after.map(JobId),
                ..filter_args(a.filter)?
            };
            out.jobs(&t.jobs(filter)?);
        }
        Command::Call(a) => out.answer(&crate::call::run(t, a)?),
        Command::Work(_) | Command::Serve(_) | Command::Demo(_) => {}
    }
    Ok(())
}

/// `relay cancel|retry|delete`: one job by id, or every job a filter
/// matches (at least one filter flag; never both).
fn admin_or_bulk(t: &Target, a: AdminArgs, what: Admin, action: wire::BulkAction, out: &Out) -> Result<(), CliError> {
    let name = action.as_str();
    match (a.id, a.filter.is_empty()) {
        (Some(id), true) => out.changed(&t.admin(JobId(id), what)?),
        (Some(_), false) => {
            return Err(CliError::Usage(format!(
                "give `relay {name}` a job id or filter flags, not both"
            )))
        }
        (None, true) => {
            return Err(CliError::Usage(format!(
                "`relay {name}` needs a job id, or filter flags (--queue, --state, --kind, --tag, --since, --until, --error-contains) for every job they match"
            )))
        }
        (None, false) => {
            let filter = filter_args(a.filter)?;
            out.bulk(&t.bulk(action, filter)?);
        }
    }
    Ok(())
}

/// The filter flags as a library filter (its limit the library's default).
fn filter_args(a: FilterArgs) -> Result<JobFilter, CliError> {
    let state = match a.state.as_deref() {
        None => None,
        Some(s) => Some(relay::wire::job_state(
            s.parse::<wire::State>().map_err(CliError::Usage)?,
        )?),
    };
    let now = relay::SystemClock.now();
    let at = |w: crate::args::When| match w {
        crate::args::When::Ago(d) => Timestamp::from_millis(
            now.as_millis()
                .saturating_sub(i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        ),
        crate::args::When::At(t) => t,
    };
    Ok(JobFilter {
        queue: a.queue,
        state,
        kind: a.kind,
        tag: a.tag,
        since: a.since.map(at),
        until: a.until.map(at),
        error_contains: a.error_contains,
        ..JobFilter::default()
    })
}

/// The commands that run the engine themselves need a file.
fn local(db: Option<PathBuf>, server: Option<&str>, what: &str, options: relay::Options) -> Result<Relay, CliError> {
    if server.is_some() {
        return Err(CliError::Usage(format!(
            "`relay {what}` runs on a database file: give --db, not --server"
        )));
    }
    open(db, options)
}

/// Commands that change the database; the others only read it.
fn writes(command: &Command) -> bool {
    match command {
        Command::Show(_) | Command::Events(_) | Command::Stats | Command::Jobs(_) | Command::Workers => false,
        // An unknown name writes nothing (it is refused once the store is
        // found): a typo never creates a database.
        Command::Call(a) => crate::call::method(&a.operation).is_some_and(|m| m != relay_client::wire::Method::Get),
        _ => true,
    }
}

/// A command that only reads does not create a database: a path that
/// does not exist (or a PostgreSQL database without Relay's tables) is a
/// typo, or the wrong place, said so.
fn must_exist(db: Option<&std::path::Path>) -> Result<(), CliError> {
    let Some(p) = db else { return Ok(()) };
    let target = p.to_string_lossy();
    match Relay::store_exists(&target) {
        Ok(true) => Ok(()),
        Ok(false) => match StoreUrl::parse(&target) {
            StoreUrl::Postgres(url) => Err(CliError::Io(format!(
                "the database at {} holds no Relay tables: check --db (or RELAY_DB); a command that writes (submit) installs them",
                redact(url)
            ))),
            StoreUrl::File(_) => Err(CliError::Io(format!(
                "there is no database at {}: check --db (or RELAY_DB); a command that writes (submit) creates it",
                p.display()
            ))),
        },
        Err(e) => Err(CliError::Relay(e)),
    }
}

/// A URL without its password, for messages.
fn redact(url: &str) -> String {
    match (url.split_once("://"), url.rfind('@')) {
        (Some((scheme, rest)), Some(_)) => match rest.rsplit_once('@') {
            Some((who, host)) => format!("{scheme}://{}@{host}", who.split(':').next().unwrap_or(who)),
            None => url.to_owned(),
        },
        _ => url.to_owned(),
    }
}

fn open(db: Option<PathBuf>, options: relay::Options) -> Result<Relay, CliError> {
    let path = db.ok_or_else(|| {
        CliError::Usage("no database given: pass --db PATH (or --server URL), or set RELAY_DB".into())
    })?;
    let target = path.to_string_lossy();
    if let StoreUrl::File(_) = StoreUrl::parse(&target) {
        if path.is_dir() {
            return Err(CliError::Io(format!(
                "{} is a directory: give the path of a database file in it, e.g. {}",
                path.display(),
                path.join("jobs.db").display()
            )));
        }
        let parent = path.parent().filter(|d| !d.as_os_str().is_empty());
        if let Some(dir) = parent.filter(|d| !d.is_dir()) {
            return Err(CliError::Io(format!(
                "cannot create {}: the directory {} does not exist (create it first, e.g. mkdir -p {})",
                path.display(),
                dir.display(),
                dir.display()
            )));
        }
    }
    Relay::connect(&target, options).map_err(|e| match e {
        Error::Open(inner) => CliError::Io(format!("cannot open {}: {inner}", path.display())),
        other => CliError::Relay(other),
    })
}

/// The payload argument: its text, stdin for `-`, empty when omitted.
fn payload_arg(p: Option<&str>) -> Result<Vec<u8>, CliError> {
    Ok(match p {
        None => Vec::new(),
        Some("-") => {
            // Read no further than the limit: `< /dev/zero` must not fill
            // memory before the size is refused.
            let limits = relay::Limits::default();
            let cap = u64::try_from(limits.max_payload_bytes)
                .unwrap_or(u64::MAX)
                .saturating_add(1);
            let mut buf = Vec::new();
            std::io::stdin()
                .take(cap)
                .read_to_end(&mut buf)
                .map_err(|e| CliError::Io(format!("cannot read the payload from stdin: {e}")))?;
            if buf.len() > limits.max_payload_bytes {
                let why = format!("stdin holds more than the limit of {} bytes", limits.max_payload_bytes);
                return Err(CliError::Relay(Error::InvalidInput(relay::InvalidInput::new(
                    "payload", why,
                ))));
            }
            buf
        }
        Some(p) => {
            // Not refused (any text makes a payload), but not unseen: a
            // payload that begins as JSON does and does not parse (`{to:
            // ada}`, a shell that ate the quotes) would reach the handler as
            // text it cannot read.
            if p.trim_start().starts_with(['{', '[']) {
                if let Err(e) = serde_json::from_str::<serde::de::IgnoredAny>(p) {
                    eprintln!(
                        "relay: note: the payload looks like JSON but is not ({e}); it is stored as {} bytes of text (in a shell, quote it: '{{\"to\":\"ada\"}}')",
                        p.len()
                    );
                }
            }
            p.as_bytes().to_vec()
        }
    })
}

/// One message for every priority outside 0-3, whatever its size or sign.
fn priority_arg(p: i64) -> Result<u8, CliError> {
    u8::try_from(p).ok().filter(|p| *p <= 3).ok_or_else(|| {
        CliError::Usage(format!(
            "{p} is not a priority: use 0 (least urgent) to 3 (most urgent)"
        ))
    })
}

fn schedule(t: &Target, c: ScheduleCommand, out: &Out) -> Result<(), CliError> {
    match c {
        ScheduleCommand::Add(a) => {
            let when = match (a.cron, a.every) {
                (Some(expr), _) => When::Cron { expr, tz: a.tz },
                (None, Some(d)) => When::Every(d, a.tz),
                (None, None) => return Err(CliError::Usage("give --cron or --every".into())),
            };
            let job = job_args(a.job)?;
            out.schedule(&t.add_schedule(&a.name, when, job)?);
        }
        ScheduleCommand::List => out.schedules(&t.schedules()?),
        ScheduleCommand::Remove(n) => out.schedule_removed(&t.remove_schedule(&n.name)?),
        ScheduleCommand::Pause(n) => out.schedule(&t.pause_schedule(&n.name, true)?),
        ScheduleCommand::Resume(n) => out.schedule(&t.pause_schedule(&n.name, false)?),
    }
    Ok(())
}

/// ` (queue X has never had a job: is its name right?)` for those of
/// `queues` with no job in any state, not paused and without settings;
/// empty when every one is known (or the counts cannot be read: this is
/// only a hint).
fn unknown_queues(t: &Target, queues: &[String]) -> String {
    let unknown: Vec<&str> = queues
        .iter()
        .filter(|q| {
            t.queue(q).is_ok_and(|info| {
                let s = &info.stats;
                s.counts.values().all(|n| *n == 0)
                    && !s.paused
                    && s.max_leased.is_none()
                    && s.rate_limit.is_none()
                    && s.max_leased_per_group.is_none()
                    && s.poison_after.is_none()
            })
        })
        .map(String::as_str)
        .collect();
    match unknown.as_slice() {
        [] => String::new(),
        [q] => format!(" (queue {q} has never had a job: is its name right?)"),
        qs => format!(
            " (queues {} have never had a job: are their names right?)",
            qs.join(", ")
        ),
    }
}

fn submit_args(a: SubmitArgs) -> Result<Submit, CliError> {
    Ok(Submit {
        delay: a.delay,
        run_at: a.run_at,
        unique_key: a.unique_key,
        idempotency_key: a.idempotency_key,
        throttle: a.throttle,
        debounce: a.debounce,
        lease_for: a.lease_for,
        timeout: a.timeout,
        on_dependency_failure: a.on_dependency_failure.parse().map_err(CliError::Usage)?,
        depends_on: a.depends_on,
        traceparent: a.traceparent,
        tags: a.tag,
        ..job_args(a.job)?
    })
}

/// A job as `JobArgs` describe it, with nothing else set.
fn job_args(a: JobArgs) -> Result<Submit, CliError> {
    Ok(Submit {
        queue: a.queue,
        kind: a.kind,
        payload: payload_arg(a.payload.as_deref())?,
        priority: priority_arg(a.priority)?,
        delay: None,
        run_at: None,
        max_attempts: a.max_attempts,
        unique_key: None,
        idempotency_key: None,
        throttle: None,
        debounce: None,
        lease_for: None,
        timeout: None,
        depends_on: Vec::new(),
        on_dependency_failure: wire::DependencyFailure::Cancel,
        traceparent: None,
        tags: Vec::new(),
        group: a.group,
    })
}
