/**
 * A worker: runs async handlers by job kind, up to `concurrency` at once.
 *
 * - Outcomes and leases travel together: handlers that finish close
 *   together (by the next turn of the event loop) are reported in one
 *   `POST /v1/work`, which also leases jobs for the free slots. A long-poll
 *   waits for jobs only when there is nothing to report, and a report never
 *   waits behind it (it goes out on another connection).
 * - One heartbeat timer extends every running job's lease in one
 *   `POST /v1/heartbeat`, at a third of the shortest running lease; a
 *   lease found lost drops that handler's outcome (`stats.lost`).
 * - A handler that resolves acks the job (its value is the result); one
 *   that throws nacks it with the error's stack (`Retry` sets the delay,
 *   `Permanent` makes it DEAD at once, `Snooze` puts it back for later
 *   without spending an attempt). An outcome counts in `stats` once the
 *   server has answered it.
 * - SIGTERM or SIGINT (or `stop()`) stops leasing, gives running handlers
 *   `graceMs`, reports their outcomes, then releases the jobs still running.
 * - A server that cannot be reached (or fails a whole call) is retried with
 *   back-off (up to 30 s), said once per outage on stderr; outcomes are kept
 *   and sent again (an ack repeated with its token is answered OK).
 */

import { Client, LeasedJob, LeaseRequest, Outcome, OutcomeAnswer, Payload } from "./client.js";
import { PayloadTooLarge, RelayError } from "./errors.js";

export type Handler = (job: LeasedJob) => Promise<Payload | void> | Payload | void;

/** Throw from a handler to retry the job after `delayMs`. */
export class Retry extends Error {
  constructor(message: string, readonly delayMs: number) {
    super(message);
  }
}

/** Throw from a handler to fail the job for good (DEAD). */
export class Permanent extends Error {}

/** Throw from a handler to run the job again after `delayMs`, no attempt spent. */
export class Snooze extends Error {
  constructor(readonly delayMs: number) {
    super(`snoozed for ${delayMs} ms`);
  }
}

export interface WorkerOptions {
  concurrency?: number;
  leaseForMs?: number;
  graceMs?: number;
  pollMs?: number;
  name?: string;
  handleSignals?: boolean;
}

export interface WorkerStats {
  succeeded: number;
  failed: number;
  snoozed: number;
  released: number;
  lost: number;
}

/** A job whose handler runs. */
interface Running {
  job: LeasedJob;
  /** The heartbeat found the lease gone: the outcome is dropped. */
  lost: boolean;
  /** Released at stop after `graceMs`: the outcome is dropped. */
  abandoned: boolean;
}

/** An outcome to send, and the stat it counts in once answered. */
interface Report {
  outcome: Outcome;
  tally: "succeeded" | "failed" | "snoozed" | "released";
}

/** Item errors that mean the job is no longer this worker's. */
const NOT_OURS = new Set(["lease_lost", "invalid_state", "not_found"]);
/** The server takes at most this many outcomes in one call. */
const MAX_OUTCOMES = 10_000;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;

export class Worker {
  readonly stats: WorkerStats = { succeeded: 0, failed: 0, snoozed: 0, released: 0, lost: 0 };
  private readonly handlers = new Map<string, Handler>();
  private readonly concurrency: number;
  private readonly leaseForMs: number;
  private readonly graceMs: number;
  private readonly pollMs: number;
  private readonly name: string;
  private readonly handleSignals: boolean;

  private readonly running = new Set<Running>();
  /** Outcomes not sent yet (or sent and failed: sent again). */
  private pending: Report[] = [];
  /** `work` calls with outcomes in flight (at most one). */
  private reporting = 0;
  /** A long-poll (a `work` call without outcomes) is in flight. */
  private polling = false;
  /** Slots that `work` calls in flight asked jobs for. */
  private reserved = 0;
  /** Outcomes per call; halved when the server finds a body too large. */
  private batchLimit = MAX_OUTCOMES;
  private flushQueued = false;

  private backoffMs = FIRST_BACKOFF_MS;
  private retryTimer?: NodeJS.Timeout;
  private outageSaid = false;

  private beatTimer?: NodeJS.Timeout;
  private beatAt = 0;
  private beating = false;

  private stopping = false;
  private graceOver = false;
  private graceTimer?: NodeJS.Timeout;
  private finished?: () => void;

  constructor(readonly client: Client, readonly queues: string[], options: WorkerOptions = {}) {
    this.concurrency = options.concurrency ?? 8;
    this.leaseForMs = options.leaseForMs ?? 30_000;
    this.graceMs = options.graceMs ?? 10_000;
    this.pollMs = options.pollMs ?? 5_000;
    this.name = options.name ?? `node-${process.pid}`;
    this.handleSignals = options.handleSignals ?? true;
    if (this.concurrency < 1) throw new RangeError("concurrency must be at least 1");
  }

  /** Registers `handler` for jobs of `kind`. */
  handle(kind: string, handler: Handler): this {
    this.handlers.set(kind, handler);
    return this;
  }

  /** Stops leasing; `run()` resolves once running jobs are settled. */
  stop(): void {
    if (this.stopping) return;
    this.stopping = true;
    if (this.finished) this.graceTimer = setTimeout(() => this.abandon(), this.graceMs);
    this.schedule();
  }

  /** Leases and runs jobs until stopped; resolves with what happened. */
  async run(): Promise<WorkerStats> {
    const onSignal = () => this.stop();
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    try {
      await new Promise<void>((resolve) => {
        this.finished = resolve;
        if (this.stopping) this.graceTimer = setTimeout(() => this.abandon(), this.graceMs);
        this.pump();
      });
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    return this.stats;
  }

  // --- Calls to the server -------------------------------------------------

  /**
   * Sends what is due: the pending outcomes (with a lease for the free
   * slots), else a long-poll for the free slots; finishes a stopped worker
   * with nothing left.
   */
  private pump(): void {
    if (!this.finished) return;
    if (this.retryTimer) {
      // Backing off; a stopped worker with nothing left need not wait.
    } else if (this.pending.length > 0) {
      if (this.reporting === 0) this.send(this.pending.splice(0, this.batchLimit));
    } else if (this.reporting === 0 && !this.polling && this.free() > 0) {
      this.send([]);
    }
    if (this.stopping) this.finishIfIdle();
  }

  /** Pumps once handlers finishing in this turn of the event loop have reported. */
  private schedule(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    setImmediate(() => {
      this.flushQueued = false;
      this.pump();
    });
  }

  private free(): number {
    return this.stopping ? 0 : Math.max(0, this.concurrency - this.running.size - this.reserved);
  }

  /** One `work` call: `reports` (may be none: then a long-poll) and a lease for the free slots. */
  private send(reports: Report[]): void {
    const max = this.free();
    const lease: LeaseRequest | undefined =
      max > 0 ? { queues: this.queues, max, leaseForMs: this.leaseForMs, waitMs: reports.length ? 0 : this.pollMs, worker: this.name } : undefined;
    const poll = reports.length === 0;
    if (poll) this.polling = true;
    else this.reporting++;
    this.reserved += max;
    const settle = () => {
      this.reserved -= max;
      if (poll) this.polling = false;
      else this.reporting--;
    };
    this.client
      .work(
        reports.map((r) => r.outcome),
        lease,
      )
      .then(
        (answer) => {
          settle();
          this.recovered();
          this.tally(reports, answer.outcomes);
          for (const job of answer.jobs) this.start(job);
        },
        (err) => {
          settle();
          this.failed(reports, err);
        },
      )
      .catch((bug) => process.stderr.write(`relay worker: internal error: ${(bug as Error)?.stack ?? bug}\n`))
      .finally(() => this.schedule());
  }

  /** Counts each answered outcome; one the server refused is said and dropped. */
  private tally(reports: Report[], answers: OutcomeAnswer[]): void {
    for (let i = 0; i < reports.length; i++) {
      const answer = answers[i];
      if (answer.error === undefined) this.stats[reports[i].tally]++;
      else if (NOT_OURS.has(answer.error.code)) this.stats.lost++;
      else process.stderr.write(`relay worker: job ${answer.id}: could not report its outcome (${answer.error.message}); its lease will expire\n`);
    }
  }

  /**
   * A whole call failed, nothing applied (or, for `MaybeApplied`, perhaps):
   * its outcomes are kept and sent again after a back-off, which is safe
   * (an ack repeated with its token is answered OK).
   */
  private failed(reports: Report[], err: unknown): void {
    const message = (err as Error)?.message ?? String(err);
    const fixed = err instanceof RelayError ? reports : reports.map(sendable);
    if (fixed.some((r, i) => r !== reports[i])) {
      // Not sent: a result could not be written as JSON. Checked here, not
      // for every job, and made a nack so it cannot fail its batch again.
      this.pending.unshift(...fixed);
    } else if (err instanceof PayloadTooLarge && reports.length > 1) {
      // Results too large together: at once, in smaller calls.
      this.batchLimit = Math.max(1, reports.length >> 1);
      this.pending.unshift(...reports);
    } else if (this.graceOver || err instanceof PayloadTooLarge) {
      // Stopping and out of time, or one result too large on its own.
      if (reports.length) process.stderr.write(`relay worker: could not report ${reports.length} outcome(s) (${message}); their leases will expire\n`);
    } else {
      this.pending.unshift(...reports);
      this.backOff(message);
    }
  }

  private backOff(message: string): void {
    if (!this.outageSaid) process.stderr.write(`relay worker: cannot lease or report outcomes (${message}); retrying with back-off\n`);
    this.outageSaid = true;
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      this.pump();
    }, this.backoffMs);
    this.backoffMs = Math.min(this.backoffMs * 2, MAX_BACKOFF_MS);
  }

  private recovered(): void {
    this.backoffMs = FIRST_BACKOFF_MS;
    if (this.batchLimit < MAX_OUTCOMES) this.batchLimit = Math.min(MAX_OUTCOMES, this.batchLimit * 2);
    if (!this.outageSaid) return;
    this.outageSaid = false;
    process.stderr.write(`relay worker: ${this.client.url} answers again\n`);
  }

  // --- Handlers -------------------------------------------------------------

  private start(job: LeasedJob): void {
    if (this.stopping) {
      // Leased by a call sent before the stop: back untried, at once.
      this.pending.push({ outcome: { id: job.id, token: job.token, outcome: "release" }, tally: "released" });
      return;
    }
    const entry: Running = { job, lost: false, abandoned: false };
    this.running.add(entry);
    this.armBeat(job.leaseForMs);
    const handler = this.handlers.get(job.kind);
    if (!handler) {
      const error = `no handler for kind '${job.kind}' on this worker (queues: ${this.queues.join(", ")})`;
      this.finish(entry, { outcome: { id: job.id, token: job.token, outcome: "nack", error, permanent: true }, tally: "failed" });
      return;
    }
    let result: ReturnType<Handler>;
    try {
      result = handler(job);
    } catch (e) {
      this.finish(entry, failure(job, e));
      return;
    }
    if (isThenable(result)) {
      result.then(
        (value) => this.finish(entry, success(job, value)),
        (e) => this.finish(entry, failure(job, e)),
      );
    } else {
      this.finish(entry, success(job, result));
    }
  }

  private finish(entry: Running, report: Report): void {
    this.running.delete(entry);
    if (entry.lost || entry.abandoned) this.stats.lost++;
    else this.pending.push(report);
    this.schedule();
  }

  // --- Heartbeat ------------------------------------------------------------

  /** Makes the heartbeat due within a third of `leaseForMs` from now. */
  private armBeat(leaseForMs: number): void {
    const at = Date.now() + Math.max(leaseForMs / 3, 100);
    if (this.beatTimer && at >= this.beatAt) return;
    clearTimeout(this.beatTimer);
    this.beatAt = at;
    this.beatTimer = setTimeout(() => this.beat(), at - Date.now());
  }

  /** Extends every running job's lease in one call; marks the ones lost. */
  private beat(): void {
    this.beatTimer = undefined;
    const held = [...this.running].filter((r) => !r.lost);
    if (held.length === 0) return; // the next job to start arms it again
    this.armBeat(Math.min(...held.map((r) => r.job.leaseForMs)));
    if (this.beating) return;
    this.beating = true;
    this.client
      .heartbeat(
        held.map((r) => ({ id: r.job.id, token: r.job.token, leaseForMs: r.job.leaseForMs })),
        this.leaseForMs,
      )
      .then(
        (answers) => answers.forEach((a, i) => a.error && NOT_OURS.has(a.error.code) && (held[i].lost = true)),
        // Unreachable: the `work` calls say so; the next beat tries again.
        () => undefined,
      )
      .finally(() => (this.beating = false));
  }

  // --- Stopping -------------------------------------------------------------

  /** `graceMs` after the stop: the jobs still running are released, their outcomes dropped. */
  private abandon(): void {
    this.graceTimer = undefined;
    this.graceOver = true;
    for (const entry of this.running) {
      entry.abandoned = true;
      this.pending.push({ outcome: { id: entry.job.id, token: entry.job.token, outcome: "release" }, tally: "released" });
    }
    this.running.clear();
    // One last try now, not after the back-off.
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.pump();
  }

  private finishIfIdle(): void {
    if (this.running.size || this.pending.length || this.reporting || this.polling || !this.finished) return;
    clearTimeout(this.graceTimer);
    clearTimeout(this.beatTimer);
    clearTimeout(this.retryTimer);
    this.beatTimer = this.retryTimer = this.graceTimer = undefined;
    const done = this.finished;
    this.finished = undefined;
    done();
  }
}

function isThenable(v: unknown): v is PromiseLike<Payload | void> {
  return typeof (v as PromiseLike<unknown> | undefined)?.then === "function";
}

function success(job: LeasedJob, value: Payload | void): Report {
  return { outcome: { id: job.id, token: job.token, outcome: "ack", result: value ?? undefined }, tally: "succeeded" };
}

/** An ack whose result cannot be written as JSON (a BigInt, a cycle) as a permanent nack saying so. */
function sendable(report: Report): Report {
  const { outcome } = report;
  if (outcome.outcome !== "ack" || outcome.result === undefined || outcome.result instanceof Uint8Array) return report;
  try {
    JSON.stringify(outcome.result);
    return report;
  } catch (e) {
    const error = `the handler's result cannot be sent as JSON: ${(e as Error).message}`;
    return { outcome: { id: outcome.id, token: outcome.token, outcome: "nack", error, permanent: true }, tally: "failed" };
  }
}

function failure(job: LeasedJob, e: unknown): Report {
  const { id, token } = job;
  if (e instanceof Snooze) return { outcome: { id, token, outcome: "release", inMs: wholeMs(e.delayMs) }, tally: "snoozed" };
  const error = e instanceof Error ? (e.stack ?? String(e)) : String(e);
  if (e instanceof Permanent) return { outcome: { id, token, outcome: "nack", error, permanent: true }, tally: "failed" };
  if (e instanceof Retry) return { outcome: { id, token, outcome: "nack", error, retryInMs: wholeMs(e.delayMs) }, tally: "failed" };
  return { outcome: { id, token, outcome: "nack", error }, tally: "failed" };
}

/**
 * A delay the server takes (whole, not negative): one it refuses would fail
 * the whole batch it travels in, every time it is sent again.
 */
function wholeMs(ms: number): number | undefined {
  return Number.isFinite(ms) ? Math.max(0, Math.round(ms)) : undefined;
}
