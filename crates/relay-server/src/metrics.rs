//! Prometheus text: requests by route and status, their latency, the
//! writer's commits and batch sizes, and jobs by queue and state.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Mutex;
use std::time::Duration;

const BUCKETS: [f64; 10] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 0.5, 2.5, 30.0];

/// Marks the answer of a long-poll (a call that may wait for jobs: see
/// `calls::Handle::long_poll`), timed apart from request latency.
#[derive(Clone, Copy)]
pub(crate) struct LongPoll;

#[derive(Default)]
struct Route {
    by_status: BTreeMap<u16, u64>,
    /// Requests answered without waiting for jobs.
    latency: Histogram,
    /// Long-polls (a lease that may wait): mostly their wait.
    long_poll: Histogram,
}

#[derive(Default)]
struct Histogram {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    fn observe(&mut self, secs: f64) {
        for (i, b) in BUCKETS.iter().enumerate() {
            if secs <= *b {
                self.buckets[i] += 1;
            }
        }
        self.count += 1;
        self.sum += secs;
    }

    fn render(&self, out: &mut String, name: &str, route: &str) {
        if self.count == 0 {
            return;
        }
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"{b}\"}} {}", self.buckets[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{route=\"{route}\",le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{route=\"{route}\"}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{route=\"{route}\"}} {}", self.count);
    }
}

/// A label value as Prometheus's text format writes it: `\`, `"` and
/// newlines escaped (job kinds may hold any of them).
fn label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

#[derive(Default)]
pub(crate) struct Metrics {
    routes: Mutex<BTreeMap<String, Route>>,
}

impl Metrics {
    /// One request: counted by status, its time in the latency histogram,
    /// or (`long_poll`: it may have waited for jobs) in the long-polls'.
    pub(crate) fn observe(&self, route: &str, status: u16, took: Duration, long_poll: bool) {
        let Ok(mut routes) = self.routes.lock() else { return };
        let r = routes.entry(route.to_owned()).or_default();
        *r.by_status.entry(status).or_default() += 1;
        let h = if long_poll { &mut r.long_poll } else { &mut r.latency };
        h.observe(took.as_secs_f64());
    }

    pub(crate) fn render(
        &self,
        relay: &relay::Metrics,
        jobs: &JobMetrics,
        queues: Option<(&relay::Stats, &relay::QueueTotals)>,
    ) -> String {
        let mut out = String::new();
        let writer = [
            (
                "relay_commits_total",
                "counter",
                "Commits made by the writer (durable once answered).",
                relay.commits,
            ),
            (
                "relay_operations_total",
                "counter",
                "Operations carried by those commits.",
                relay.operations,
            ),
            (
                "relay_failed_commits_total",
                "counter",
                "Commits that failed.",
                relay.failed_commits,
            ),
            (
                "relay_largest_batch",
                "gauge",
                "Most operations in one commit.",
                relay.largest_batch,
            ),
            (
                "relay_syncs_total",
                "counter",
                "Separate fsyncs of split commits (SQLite), each covering one or more commits.",
                relay.syncs,
            ),
            (
                "relay_schedule_ticks_skipped_total",
                "counter",
                "Ticks of schedules passed over (the process was down or the scheduler behind); each late job's submitted event says how many it covered.",
                relay.skipped_ticks,
            ),
            (
                "relay_leases_expired_total",
                "counter",
                "Leases that expired and were reclaimed (a worker died, hung, or did not extend in time).",
                relay.leases_expired,
            ),
            (
                "relay_leases_lost_total",
                "counter",
                "Calls (ack, nack, extend, progress...; each item of a batch call) refused because their lease was lost (expired, or taken by a later lease): their work was not recorded.",
                relay.leases_lost,
            ),
        ];
        for (name, kind, help, value) in writer {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
        }
        if let Some((top, totals)) = queues {
            let _ = writeln!(
                out,
                "# HELP relay_jobs Jobs by queue and state: the queues with the most READY jobs (--metrics-queues), the rest summed under queue=\"(other)\".\n# TYPE relay_jobs gauge"
            );
            let mut other = totals.counts.clone();
            for (queue, q) in &top.queues {
                for (state, n) in &q.counts {
                    let _ = writeln!(out, "relay_jobs{{queue=\"{queue}\",state=\"{state}\"}} {n}");
                    if let Some(rest) = other.get_mut(state) {
                        *rest = rest.saturating_sub(*n);
                    }
                }
            }
            if totals.queues > top.queues.len() as u64 {
                for (state, n) in &other {
                    let _ = writeln!(out, "relay_jobs{{queue=\"(other)\",state=\"{state}\"}} {n}");
                }
            }
            let _ = writeln!(
                out,
                "# HELP relay_queue_paused 1 while the queue is paused (the queues relay_jobs labels).\n# TYPE relay_queue_paused gauge"
            );
            for (queue, q) in &top.queues {
                let _ = writeln!(out, "relay_queue_paused{{queue=\"{queue}\"}} {}", u8::from(q.paused));
            }
            let _ = writeln!(
                out,
                "# HELP relay_queue_oldest_ready_age_seconds How long the oldest due job of the queue has waited to be leased (0: none waits; the queues relay_jobs labels).\n# TYPE relay_queue_oldest_ready_age_seconds gauge"
            );
            for (queue, q) in &top.queues {
                let age = q.oldest_ready_age.map_or(0.0, |a| a.as_secs_f64());
                let _ = writeln!(out, "relay_queue_oldest_ready_age_seconds{{queue=\"{queue}\"}} {age}");
            }
            let _ = writeln!(
                out,
                "# HELP relay_queues Queues with jobs, paused or limited.\n# TYPE relay_queues gauge\nrelay_queues {}",
                totals.queues
            );
            let _ = writeln!(
                out,
                "# HELP relay_queues_paused Paused queues.\n# TYPE relay_queues_paused gauge\nrelay_queues_paused {}",
                totals.paused
            );
        }
        kind_histogram(
            &mut out,
            "relay_queue_wait_seconds",
            "How long leased jobs waited between becoming ready and being leased",
            &jobs.waits,
        );
        kind_histogram(
            &mut out,
            "relay_job_run_seconds",
            "How long the leases this server handed out ran until their outcome (ack, nack or expiry)",
            &jobs.runs,
        );
        let _ = writeln!(
            out,
            "# HELP relay_job_outcomes_total Attempts ended, by outcome (succeeded, failed, dead, expired) and by the queue and kind of their lease; \"(other)\" for leases another process handed out, and past {} pairs.\n# TYPE relay_job_outcomes_total counter",
            relay::WAIT_PAIRS
        );
        for o in &jobs.outcomes {
            let _ = writeln!(
                out,
                "relay_job_outcomes_total{{queue=\"{}\",kind=\"{}\",outcome=\"{}\"}} {}",
                label(&o.queue),
                label(&o.kind),
                o.outcome.as_str(),
                o.count
            );
        }
        let Ok(routes) = self.routes.lock() else { return out };
        let _ = writeln!(
            out,
            "# HELP relay_http_requests_total Requests by route and status.\n# TYPE relay_http_requests_total counter"
        );
        for (route, r) in routes.iter() {
            for (status, n) in &r.by_status {
                let _ = writeln!(
                    out,
                    "relay_http_requests_total{{route=\"{route}\",status=\"{status}\"}} {n}"
                );
            }
        }
        let _ = writeln!(
            out,
            "# HELP relay_http_request_seconds Request latency (long-polls apart).\n# TYPE relay_http_request_seconds histogram"
        );
        for (route, r) in routes.iter() {
            r.latency.render(&mut out, "relay_http_request_seconds", route);
        }
        let _ = writeln!(
            out,
            "# HELP relay_http_long_poll_seconds Time of the leases that may wait for jobs (mostly that wait).\n# TYPE relay_http_long_poll_seconds histogram"
        );
        for (route, r) in routes.iter() {
            r.long_poll.render(&mut out, "relay_http_long_poll_seconds", route);
        }
        out
    }
}

/// What `/metrics` shows by queue and kind, from [`relay::Relay`]'s
/// counters.
pub(crate) struct JobMetrics {
    pub(crate) waits: Vec<relay::QueueWait>,
    pub(crate) runs: Vec<relay::QueueWait>,
    pub(crate) outcomes: Vec<relay::JobOutcomes>,
}

/// One histogram family by queue and kind, in seconds.
fn kind_histogram(out: &mut String, name: &str, help: &str, all: &[relay::QueueWait]) {
    let _ = writeln!(
        out,
        "# HELP {name} {help}, by queue and kind (at most {} pairs, the rest under \"(other)\").\n# TYPE {name} histogram",
        relay::WAIT_PAIRS
    );
    for w in all {
        let labels = format!("queue=\"{}\",kind=\"{}\"", label(&w.queue), label(&w.kind));
        for (b, n) in relay::WAIT_BUCKETS.iter().zip(&w.buckets) {
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {n}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", w.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", w.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", w.count);
    }
}
