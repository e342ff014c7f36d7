/**
 * A worker: runs async handlers by job kind, up to `concurrency` at once.
 *
 * - Leases as many jobs as there are free slots (a long-poll).
 * - While a handler runs, a heartbeat extends its lease every third of the
 *   lease's length; a lease found lost drops the handler's outcome.
 * - A handler that resolves acks the job (its value is the result); one
 *   that throws nacks it with the error's stack (`Retry` sets the delay,
 *   `Permanent` makes it DEAD at once, `Snooze` puts it back for later
 *   without spending an attempt).
 * - SIGTERM or SIGINT (or `stop()`) stops leasing, gives running handlers
 *   `graceMs`, then releases the jobs still running.
 * - A server that cannot be reached is retried with back-off (up to 30 s),
 *   said once per outage on stderr.
 */

import { Client, LeasedJob, Payload } from "./client.js";
import { InvalidState, LeaseLost, RelayError } from "./errors.js";

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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export class Worker {
  readonly stats: WorkerStats = { succeeded: 0, failed: 0, snoozed: 0, released: 0, lost: 0 };
  private readonly handlers = new Map<string, Handler>();
  private readonly running = new Map<number, { job: LeasedJob; done: Promise<void> }>();
  private stopping = false;
  private readonly concurrency: number;
  private readonly leaseForMs: number;
  private readonly graceMs: number;
  private readonly pollMs: number;
  private readonly name: string;
  private readonly handleSignals: boolean;

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
    this.stopping = true;
  }

  /** Leases and runs jobs until stopped; resolves with what happened. */
  async run(): Promise<WorkerStats> {
    const onSignal = () => this.stop();
    if (this.handleSignals) {
      process.on("SIGTERM", onSignal);
      process.on("SIGINT", onSignal);
    }
    let backoff = 500;
    let outage = false;
    try {
      while (!this.stopping) {
        const free = this.concurrency - this.running.size;
        if (free === 0) {
          await Promise.race([...this.running.values()].map((r) => r.done));
          continue;
        }
        let jobs: LeasedJob[];
        try {
          jobs = await this.client.lease(this.queues, {
            max: free,
            leaseForMs: this.leaseForMs,
            waitMs: this.pollMs,
            worker: this.name,
          });
          if (outage) process.stderr.write(`relay worker: ${this.client.url} answers again\n`);
          outage = false;
          backoff = 500;
        } catch (e) {
          if (!outage) process.stderr.write(`relay worker: cannot lease (${(e as Error).message}); retrying with back-off\n`);
          outage = true;
          await sleep(backoff);
          backoff = Math.min(backoff * 2, 30_000);
          continue;
        }
        for (const job of jobs) {
          // In the running set before the handler starts: a handler that
          // throws at once settles before `runOne` first awaits.
          const entry = { job, done: Promise.resolve() };
          this.running.set(job.id, entry);
          entry.done = this.runOne(job).finally(() => this.running.delete(job.id));
        }
      }
      await this.drain();
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    return this.stats;
  }

  private async drain(): Promise<void> {
    const all = Promise.all([...this.running.values()].map((r) => r.done));
    await Promise.race([all, sleep(this.graceMs)]);
    const left = [...this.running.values()].map((r) => r.job);
    this.running.clear();
    for (const job of left) {
      try {
        await this.client.release(job.id, job.token);
        this.stats.released++;
      } catch {
        // its lease will expire
      }
    }
  }

  private async runOne(job: LeasedJob): Promise<void> {
    let lost = false;
    const beat = setInterval(async () => {
      try {
        await this.client.extend(job.id, job.token, job.leaseForMs);
      } catch (e) {
        if (e instanceof LeaseLost || e instanceof InvalidState) lost = true;
      }
    }, Math.max(job.leaseForMs / 3, 100));
    let outcome: ["ack", Payload] | ["snooze", number] | ["dead", string] | ["retry", string, number | undefined];
    try {
      const handler = this.handlers.get(job.kind);
      if (!handler) {
        outcome = ["dead", `no handler for kind '${job.kind}' on this worker (queues: ${this.queues.join(", ")})`];
      } else {
        try {
          outcome = ["ack", (await handler(job)) ?? undefined];
        } catch (e) {
          const err = e as Error;
          const text = err.stack ?? String(e);
          if (e instanceof Snooze) outcome = ["snooze", e.delayMs];
          else if (e instanceof Permanent) outcome = ["dead", text];
          else if (e instanceof Retry) outcome = ["retry", text, e.delayMs];
          else outcome = ["retry", text, undefined];
        }
      }
    } finally {
      clearInterval(beat);
    }
    // Released by the drain, or its lease is gone: the outcome is dropped.
    if (lost || !this.running.has(job.id)) {
      this.stats.lost++;
      return;
    }
    try {
      switch (outcome[0]) {
        case "ack":
          await this.client.ack(job.id, job.token, outcome[1]);
          this.stats.succeeded++;
          break;
        case "snooze":
          await this.client.release(job.id, job.token, outcome[1]);
          this.stats.snoozed++;
          break;
        case "dead":
          await this.client.nack(job.id, job.token, outcome[1], { permanent: true });
          this.stats.failed++;
          break;
        case "retry":
          await this.client.nack(job.id, job.token, outcome[1], { retryInMs: outcome[2] });
          this.stats.failed++;
          break;
      }
    } catch (e) {
      if (e instanceof LeaseLost || e instanceof InvalidState) this.stats.lost++;
      else if (e instanceof RelayError)
        process.stderr.write(`relay worker: job ${job.id}: could not report its outcome (${e.message}); its lease will expire\n`);
      else throw e;
    }
  }
}
