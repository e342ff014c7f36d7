/**
 * A worker: runs async handlers by job kind, up to `concurrency` at once.
 *
 * - Outcomes and leases travel together: handlers that finish close
 *   together (by the next turn of the event loop) are reported in one
 *   `POST /v1/work`, which also leases jobs for the free slots. A long-poll
 *   waits for jobs only when there is nothing to report, and a report never
 *   waits behind it (it goes out on another connection).
 * - One heartbeat timer extends every running job's lease (and those of
 *   outcomes not reported yet) in one `POST /v1/heartbeat`, at a third of
 *   the shortest lease; a
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
 *   and sent again (an ack repeated with its token is answered OK). A call
 *   refused whole (400) is sent again one outcome per call; an outcome
 *   refused on its own becomes a permanent nack saying why. A 401/403 makes
 *   `run()` reject with it.
 */

import { randomBytes } from "node:crypto";
import { hostname } from "node:os";
import { Client, LeasedJob, LeaseRequest, NewJob, Outcome, OutcomeAnswer, Payload } from "./client.js";
import { BadAnswer } from "./client.js";
import { Busy, Forbidden, InvalidInput, InvalidRequest, MaybeApplied, PayloadTooLarge, RelayError, Timeout, Unauthorized, Unavailable } from "./errors.js";

/** A job's handler: it gets the job and its context (durable steps). */
export type Handler = (job: LeasedJob, ctx: JobContext) => Promise<Payload | void> | Payload | void;

/**
 * What a handler gets beside its job: its durable steps.
 *
 * ```ts
 * worker.handle("order", async (job, ctx) => {
 *   const charge = await ctx.step("charge", () => pay(job.payload, { idempotencyKey: ctx.key("charge") }));
 *   await ctx.step("email", () => sendReceipt(charge));
 * });
 * ```
 */
export class JobContext {
  private readonly recorded = new Map<string, Payload>();
  private readonly giveUpAt: number;

  constructor(
    readonly client: Client,
    readonly job: LeasedJob,
    /** A Worker's: records go with its outcomes in `POST /v1/work`. */
    private readonly record?: (name: string, output: Payload) => Promise<{ recorded: boolean; output: Payload }>,
  ) {
    for (const s of job.steps ?? []) this.recorded.set(s.name, s.output);
    this.giveUpAt = Date.now() + job.leaseForMs;
  }

  /**
   * Runs step `name` of the job once, whatever happens to the worker: when
   * an earlier run of the job recorded it, resolves to the recorded output
   * without calling `fn`; otherwise calls `fn`, records what it resolves to
   * under the job's lease (a JSON value, or bytes; on disk before this
   * resolves) and resolves to it.
   *
   * Code outside steps runs again on every attempt; a step's `fn` runs again
   * only when its worker died (or lost its lease) between its end and the
   * record: give a side effect an idempotency key (`key`). An `fn` that
   * throws records nothing; the next attempt runs it again. Rejects with
   * `LeaseLost` when the lease is lost (this run's outcome will be refused),
   * `StepBound` past the job's 1,000 steps or 1 MiB of output.
   */
  async step<T extends Payload | void>(name: string, fn: () => Promise<T> | T): Promise<T> {
    if (this.recorded.has(name)) return this.recorded.get(name) as T;
    const value = await fn();
    if (this.record) {
      const done = await this.record(name, (value ?? null) as Payload);
      const standing = (done.recorded ? value : done.output) as T;
      this.recorded.set(name, standing as Payload);
      return standing;
    }
    let pause = 50;
    for (;;) {
      try {
        const done = await this.client.recordStep(this.job.id, this.job.token, name, value as Payload);
        const standing = (done.recorded ? value : done.output) as T;
        this.recorded.set(name, standing as Payload);
        return standing;
      } catch (e) {
        // The server cannot be reached or answer now: a record is safe to
        // send again (the first of a name stands), while the lease holds.
        const again = e instanceof Unavailable || e instanceof Busy || e instanceof Timeout || e instanceof MaybeApplied;
        if (!again || Date.now() + pause >= this.giveUpAt) throw e;
        await new Promise((r) => setTimeout(r, pause));
        pause = Math.min(pause * 2, 2000);
      }
    }
  }

  /**
   * Sleeps for `ms` without holding a worker: throws `Sleep`, which the
   * worker records as the job's outcome (the job gives its lease back and
   * is WAITING until then, when it is leased again and its handler runs
   * from the start, passing its recorded steps and this sleep at once).
   * The sleep is recorded as step `name` with the time it wakes: a run
   * before that time sleeps until it, one after it goes on. No attempt is
   * spent. `await ctx.sleep("cool-off", 86_400_000)`.
   */
  async sleep(name: string, ms: number): Promise<void> {
    return this.sleepUntil(name, new Date(Date.now() + ms));
  }

  /** `sleep` until a time. */
  async sleepUntil(name: string, when: Date): Promise<void> {
    let untilMs = when.getTime();
    if (this.recorded.has(name)) {
      const r = this.recorded.get(name) as { sleep_until_ms?: unknown } | null;
      if (!r || typeof r !== "object" || typeof r.sleep_until_ms !== "number") {
        throw new Permanent(`step '${name}' is recorded and is not a sleep; name the sleep anew`);
      }
      untilMs = r.sleep_until_ms;
    }
    if (untilMs <= Date.now()) return;
    throw new Sleep(name, untilMs);
  }

  /**
   * Waits for event `key` (`client.emit`, `relay emit`) for at most
   * `timeoutMs` without holding a worker: resolves to its payload once it is
   * emitted (at once when it was emitted already, in the last 7 days), or
   * rejects with `TimedOut` when the time ran out first. Recorded as step
   * `name`: a later run gets the same answer. While the event has not come
   * it throws `Wait`, which the worker records as the job's outcome (the job
   * is WAITING, holding no worker, until the emit or the timeout; then its
   * handler runs from the start, passing its recorded steps and this wait).
   */
  async waitEvent(name: string, key: string, timeoutMs: number): Promise<Payload> {
    if (this.recorded.has(name)) {
      const r = this.recorded.get(name) as Record<string, unknown> | null;
      if (r && typeof r === "object" && !(r instanceof Uint8Array) && Object.keys(r).length === 1) {
        if (r.timed_out === true) throw new TimedOut(`no event '${key}' came in time (step '${name}')`);
        if ("event" in r) return r.event as Payload;
        if (typeof r.event_base64 === "string") return new Uint8Array(Buffer.from(r.event_base64, "base64"));
      }
      throw new Permanent(`step '${name}' is recorded and is not a wait for an event; name the wait anew`);
    }
    throw new Wait(name, key, Date.now() + timeoutMs);
  }

  /**
   * Makes a completion token once, as step `name`, open for `timeoutMs`: a
   * human or a third party completes it once, without an API token, by
   * POSTing a JSON payload to its `url` (`client.completeToken`). Put the
   * URL in an approval email or hand it to a vendor's webhook, then
   * `waitToken`. Every later run gets the same token.
   */
  async token(name: string, timeoutMs: number): Promise<Token> {
    const rec = (await this.step(name, async () => {
      const t = await this.client.createToken(this.job.id, this.job.token, timeoutMs);
      return { id: t.id, token: t.token, path: t.path, key: t.key, expires_at: t.expiresAt };
    })) as Record<string, unknown> | null;
    if (!rec || typeof rec.token !== "string" || typeof rec.path !== "string") {
      throw new Permanent(`step '${name}' is recorded and is not a token; name the token anew`);
    }
    return { id: String(rec.id), token: rec.token, url: this.client.url + rec.path, key: String(rec.key), expiresAt: String(rec.expires_at) };
  }

  /**
   * Waits for `token` to be completed, as `waitEvent` waits for an event:
   * resolves to the payload it was completed with, or rejects with
   * `TimedOut` once it expired. Recorded as step `name`.
   */
  async waitToken(name: string, token: Token): Promise<Payload> {
    return await this.waitEvent(name, token.key, Math.max(0, Date.parse(token.expiresAt) - Date.now()));
  }

  /**
   * Submits a child job once, as step `name`: its submit carries the step's
   * idempotency key (`key`), so a run again after a crash between the
   * submit and its record finds the same job. Resolves to the child's id
   * (recorded: every later run gets it back). Await it with `join`.
   */
  async spawn(name: string, job: NewJob): Promise<number> {
    const key = this.key(name);
    return (await this.step(name, async () => await this.client.submit({ ...job, idempotencyKey: key }))) as number;
  }

  /**
   * Awaits job `child`'s end without holding a worker: resolves to its
   * result once it SUCCEEDED, rejects with `ChildFailed` (its `state`, its
   * `error`) when it ended DEAD or CANCELLED or was deleted. Recorded as
   * step `name`: a later run gets the same answer. While the child runs it
   * throws `Join`, which the worker records as the job's outcome (the job
   * gives its lease back and is WAITING until the child ends, then its
   * handler runs from the start, passing its recorded steps and this
   * join); a `catch` in the handler must rethrow it.
   */
  async join(name: string, child: number): Promise<Payload> {
    if (this.recorded.has(name)) {
      const r = this.recorded.get(name) as Record<string, unknown> | null;
      if (r && typeof r === "object" && !(r instanceof Uint8Array) && typeof r.joined === "number" && typeof r.state === "string") {
        if (r.state === "SUCCEEDED") {
          if (typeof r.result_base64 === "string") return new Uint8Array(Buffer.from(r.result_base64, "base64"));
          return (r.result ?? null) as Payload;
        }
        throw new ChildFailed(r.joined, r.state, typeof r.error === "string" ? r.error : null);
      }
      throw new Permanent(`step '${name}' is recorded and is not a join; name the join anew`);
    }
    throw new Join(name, child);
  }

  /** An idempotency key for the side effect of step `name`: the same on every attempt of this job, different for every other job and step (`relay-<job id>-<name>`). */
  key(name: string): string {
    return `relay-${this.job.id}-${name}`;
  }

  /** The outputs recorded so far, by step name. */
  get steps(): Map<string, Payload> {
    return new Map(this.recorded);
  }
}

/** Throw from a handler to retry the job after `delayMs`. */
export class Retry extends Error {
  constructor(message: string, readonly delayMs: number) {
    super(message);
    checkDelay(delayMs);
  }
}

/**
 * Thrown by `ctx.sleep` to put the job to sleep: let it through (a
 * `catch` in the handler must rethrow it); the worker records the sleep as
 * the job's outcome.
 */
export class Sleep extends Error {
  constructor(
    readonly step: string,
    readonly untilMs: number,
  ) {
    super(`asleep until ${new Date(untilMs).toISOString()}`);
  }
}

/**
 * Thrown by `ctx.waitEvent` while its event has not come: let it through (a
 * `catch` in the handler must rethrow it); the worker records the wait as
 * the job's outcome.
 */
export class Wait extends Error {
  constructor(
    readonly step: string,
    readonly key: string,
    readonly untilMs: number,
  ) {
    super(`waiting for event '${key}' until ${new Date(untilMs).toISOString()}`);
  }
}

/**
 * What `ctx.join` throws while the joined job runs (a `catch` in the
 * handler must rethrow it); the worker records the join as the job's
 * outcome.
 */
export class Join extends Error {
  constructor(
    readonly step: string,
    readonly child: number,
  ) {
    super(`awaiting job ${child}`);
  }
}

/** A completion token (`ctx.token`): `url` completes it (`POST` a JSON payload; no API token needed). */
export interface Token {
  id: string;
  /** Its `<id>.<secret>`. */
  token: string;
  url: string;
  /** The event its completion emits. */
  key: string;
  /** When it expires (RFC 3339). */
  expiresAt: string;
}

/** A joined job ended without succeeding: `state` DEAD, CANCELLED or DELETED, `error` its last error. */
export class ChildFailed extends Error {
  constructor(
    readonly job: number,
    readonly state: string,
    readonly error: string | null,
  ) {
    super(`job ${job} ended ${state}${error ? `: ${error}` : ""}`);
  }
}

/** What `ctx.waitEvent` throws when its event did not come in time: catch it to act on the timeout. */
export class TimedOut extends Error {}

/** Throw from a handler to fail the job for good (DEAD). */
export class Permanent extends Error {}

/** Throw from a handler to run the job again after `delayMs`, no attempt spent. */
export class Snooze extends Error {
  constructor(readonly delayMs: number) {
    super(`snoozed for ${delayMs} ms`);
    checkDelay(delayMs);
  }
}

export interface WorkerOptions {
  concurrency?: number;
  leaseForMs?: number;
  graceMs?: number;
  pollMs?: number;
  name?: string;
  handleSignals?: boolean;
  /** How often the worker tells the server it is alive and what it runs (`relay workers`); 100-600,000 ms, 5,000 by default. */
  beatEveryMs?: number;
}

export interface WorkerStats {
  succeeded: number;
  failed: number;
  snoozed: number;
  /** Put to sleep by their handlers (`ctx.sleep`). */
  slept: number;
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
  /** When its handler started (RFC 3339). */
  since: string;
}

/** An outcome to send, and the stat it counts in once answered; or a step record, and the handler waiting on it. */
interface Report {
  outcome: Outcome;
  tally: "succeeded" | "failed" | "snoozed" | "slept" | "released" | "step";
  /** A step record's handler, told its answer. */
  record?: { resolve: (done: { recorded: boolean; output: Payload }) => void; reject: (e: unknown) => void };
  /** The job's lease length, for the heartbeat while the outcome waits to be reported. */
  leaseForMs: number;
  /** Sent in a call of its own, without a lease: its batch was refused whole. */
  alone?: boolean;
  /** The nack saying why the server refused this job's outcome: not replaced again. */
  refusal?: boolean;
}

/** Item errors that mean the job is no longer this worker's. */
const NOT_OURS = new Set(["lease_lost", "invalid_state", "not_found"]);
/** The server takes at most this many outcomes in one call. */
const MAX_OUTCOMES = 10_000;
/** The server leases at most this many jobs in one call. */
const LEASE_MAX = 1000;
/** The longest delay the server takes: u64::MAX nanoseconds, in whole ms. */
const MAX_DELAY_MS = 18_446_744_073_709;
/** The longest lease the server grants (a day). */
const MAX_LEASE_MS = 24 * 3600 * 1000;
/** The server keeps at most this much of a nack's error text (bytes). */
const MAX_ERROR_BYTES = 8 * 1024;
/** The long-poll used once the server refused `pollMs` as over its `--max-wait`. */
const FALLBACK_POLL_MS = 1_000;
const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 30_000;

export class Worker {
  readonly stats: WorkerStats = { succeeded: 0, failed: 0, snoozed: 0, slept: 0, released: 0, lost: 0 };
  private readonly handlers = new Map<string, Handler>();
  private readonly concurrency: number;
  private readonly leaseForMs: number;
  private readonly graceMs: number;
  private pollMs: number;
  /** `pollMs` was lowered once already (the server refused it). */
  private pollLowered = false;
  /** A 401/403: `run()` rejects with it. */
  private fatal?: RelayError;
  /** Outcomes in a `work` call in flight (their leases still beaten). */
  private readonly inFlight = new Set<Report>();
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
    this.leaseForMs = Math.max(1, clampMs(options.leaseForMs ?? 30_000, MAX_LEASE_MS));
    this.graceMs = options.graceMs ?? 10_000;
    this.pollMs = clampMs(options.pollMs ?? 5_000, MAX_DELAY_MS);
    this.name = options.name ?? `node-${process.pid}`;
    this.handleSignals = options.handleSignals ?? true;
    this.beatEveryMs = options.beatEveryMs ?? 5_000;
    if (this.concurrency < 1) throw new RangeError("concurrency must be at least 1");
    if (!(this.beatEveryMs >= 100 && this.beatEveryMs <= 600_000)) throw new RangeError("beatEveryMs must be 100-600000");
    this.id = `${this.name.slice(0, 48).replace(/[^A-Za-z0-9_.-]/g, "_")}-${Math.floor(Math.random() * 2 ** 32)
      .toString(16)
      .padStart(8, "0")}`;
  }

  /** This worker's id in `relay workers` and `GET /v1/workers`, unique to its run. */
  readonly id: string;
  private readonly beatEveryMs: number;
  private presenceTimer?: NodeJS.Timeout;
  private readonly startedAt = new Date().toISOString();
  private presenceFailing = false;
  /** The heartbeat in flight, awaited before the last (a later "alive" would undo "stopped"). */
  private presenceInFlight?: Promise<unknown>;
  /** This worker's secret, sent with every heartbeat from the first: no other client can write its record, and a first heartbeat whose answer was lost is simply sent again. */
  private readonly presenceSecret = randomBytes(32).toString("hex");

  /** Tells the server this worker is alive and what it runs (`PUT /v1/workers/{id}`); with `stopped`, that it stopped. */
  private async presence(stopped: boolean): Promise<void> {
    const running = stopped
      ? []
      : [...this.running]
          .map((r) => ({ id: r.job.id, token: r.job.token, since: r.since }))
          .sort((a, b) => a.id - b.id)
          .slice(0, 4096);
    await this.client.putWorker(this.id, {
      secret: this.presenceSecret,
      name: this.name.slice(0, 64),
      host: hostname().slice(0, 255),
      pid: process.pid,
      queues: this.queues,
      concurrency: this.concurrency,
      version: "relay-typescript 0.1.0",
      started_at: this.startedAt,
      beat_every_ms: this.beatEveryMs,
      running,
      stopped,
    });
  }

  private presenceLoop(): void {
    if (!this.finished) return;
    this.presenceInFlight = this.presence(false)
      .then(
        () => (this.presenceFailing = false),
        (e) => {
          if (!this.presenceFailing) process.stderr.write(`relay worker: could not send this worker's heartbeat (${(e as Error)?.message ?? e}); trying again\n`);
          this.presenceFailing = true;
        },
      )
      .finally(() => {
        if (this.finished) this.presenceTimer = setTimeout(() => this.presenceLoop(), this.beatEveryMs);
      });
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

  /**
   * Leases and runs jobs until stopped; resolves with what happened.
   * Rejects with `Unauthorized` or `Forbidden` when the server refuses the
   * worker's token (401/403): retrying cannot help. The jobs it held are
   * left to their leases' expiry; handlers still running are not awaited.
   */
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
        this.presenceLoop();
        this.pump();
      });
      clearTimeout(this.presenceTimer);
      await this.presenceInFlight;
      if (!this.fatal) {
        await this.presence(true).catch((e) =>
          process.stderr.write(`relay worker: could not tell the server this worker stopped (${(e as Error)?.message ?? e})\n`),
        );
      }
    } finally {
      if (this.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
    }
    if (this.fatal) throw this.fatal;
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
      if (this.reporting === 0) {
        if (this.pending[0].alone) this.send(this.pending.splice(0, 1), false);
        else {
          let n = 0;
          while (n < this.pending.length && n < this.batchLimit && !this.pending[n].alone) n++;
          this.send(this.pending.splice(0, n));
        }
      }
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
  private send(reports: Report[], withLease = true): void {
    const max = withLease ? Math.min(this.free(), LEASE_MAX) : 0;
    const lease: LeaseRequest | undefined =
      max > 0 ? { queues: this.queues, max, leaseForMs: this.leaseForMs, waitMs: reports.length ? 0 : this.pollMs, worker: this.id } : undefined;
    const poll = reports.length === 0;
    if (poll) this.polling = true;
    else this.reporting++;
    this.reserved += max;
    for (const r of reports) this.inFlight.add(r);
    const settle = () => {
      this.reserved -= max;
      for (const r of reports) this.inFlight.delete(r);
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
          // The jobs first: each is run (or released), whatever follows.
          for (const job of answer.jobs) this.start(job);
          this.recovered();
          this.tally(reports, answer.outcomes);
        },
        (err) => {
          settle();
          // Jobs leased by an answer that is wrong otherwise: run them.
          if (err instanceof BadAnswer) for (const job of err.jobs) this.start(job);
          this.failed(reports, err, lease);
        },
      )
      .catch((bug) => process.stderr.write(`relay worker: internal error: ${(bug as Error)?.stack ?? bug}\n`))
      .finally(() => this.schedule());
  }

  /** Counts each answered outcome; one the server refused is said and dropped. */
  private tally(reports: Report[], answers: OutcomeAnswer[]): void {
    for (let i = 0; i < reports.length; i++) {
      const answer = answers[i];
      if (answer === undefined) continue; // checked by `Client.work`
      const record = reports[i].record;
      if (record) {
        if (answer.error !== undefined) record.reject(answer.error);
        else if (answer.earlier) record.resolve({ recorded: false, output: answer.earlier.output });
        else record.resolve({ recorded: true, output: (reports[i].outcome as { output?: Payload }).output ?? null });
        continue;
      }
      const tally = reports[i].tally;
      if (answer.error === undefined) {
        if (tally !== "step") this.stats[tally]++;
      } else if (NOT_OURS.has(answer.error.code)) this.stats.lost++;
      else this.refused(reports[i], answer.error.message);
    }
  }

  /**
   * The server refused this outcome for good (a result over the size
   * limit...): the job fails for good saying why, instead of running again
   * once its lease expires; a refused refusal is dropped.
   */
  private refused(report: Report, why: string, err?: unknown): void {
    const { id, token } = report.outcome;
    if (report.record) {
      report.record.reject(err ?? new RelayError(why, "refused"));
      return;
    }
    if (report.refusal || this.graceOver) {
      process.stderr.write(`relay worker: job ${id}: could not report its outcome (${why}); its lease will expire\n`);
      return;
    }
    const error = cutError(`relay worker: the server refused this job's ${report.outcome.outcome}: ${why}`);
    process.stderr.write(`relay worker: job ${id}: the server refused its outcome (${why}); failing it for good\n`);
    this.pending.unshift({ outcome: { id, token, outcome: "nack", error, permanent: true }, tally: "failed", leaseForMs: report.leaseForMs, alone: true, refusal: true });
  }

  /**
   * A whole call failed, nothing applied (or, for `MaybeApplied`, perhaps):
   * its outcomes are kept and sent again after a back-off, which is safe
   * (an ack repeated with its token is answered OK).
   */
  private failed(reports: Report[], err: unknown, lease: LeaseRequest | undefined): void {
    const message = (err as Error)?.message ?? String(err);
    const fixed = err instanceof RelayError ? reports : reports.map(sendable);
    const refused = err instanceof InvalidRequest || err instanceof InvalidInput;
    if (err instanceof Unauthorized || err instanceof Forbidden) {
      this.giveUp(err, reports);
    } else if (refused && reports.length === 0 && !this.pollLowered && lease && lease.waitMs && lease.waitMs > FALLBACK_POLL_MS && /wait_ms/.test(message)) {
      // A server whose --max-wait is below pollMs: a shorter long-poll, once.
      this.pollLowered = true;
      this.pollMs = FALLBACK_POLL_MS;
      process.stderr.write(`relay worker: the server refused a ${lease.waitMs} ms long-poll (${message}); polling every ${FALLBACK_POLL_MS} ms instead\n`);
    } else if (refused && (reports.length > 1 || (reports.length === 1 && (lease || !reports[0].alone)))) {
      // Refused whole: one outcome (or the lease) is bad. Each again on its
      // own, without a lease, so only the bad one is refused.
      this.pending.unshift(...reports.map((r) => ({ ...r, alone: true })));
    } else if (refused && reports.length === 1) {
      // Refused alone: that outcome can never be applied.
      this.refused(reports[0], message, err);
    } else if (fixed.some((r, i) => r !== reports[i])) {
      // Not sent: a result could not be written as JSON. Checked here, not
      // for every job, and made a nack so it cannot fail its batch again.
      this.pending.unshift(...fixed);
    } else if (err instanceof PayloadTooLarge && reports.length > 1) {
      // Results too large together: at once, in smaller calls.
      this.batchLimit = Math.max(1, reports.length >> 1);
      this.pending.unshift(...reports);
    } else if (err instanceof PayloadTooLarge && reports.length === 1 && !this.graceOver) {
      // One result too large on its own: the job fails for good, saying so.
      this.refused(reports[0], message, err);
    } else if (this.graceOver || err instanceof PayloadTooLarge) {
      // Stopping and out of time, or one result too large on its own.
      for (const r of reports) r.record?.reject(err);
      reports = reports.filter((r) => !r.record);
      if (reports.length) process.stderr.write(`relay worker: could not report ${reports.length} outcome(s) (${message}); their leases will expire\n`);
    } else {
      this.pending.unshift(...reports);
      this.backOff(message);
    }
  }

  /** A 401/403: nothing can be sent; `run()` rejects with `err` now. */
  private giveUp(err: RelayError, reports: Report[]): void {
    // A step record's handler is told, whichever call brought the refusal
    // (a report still in flight after the poll's 401, say).
    for (const r of reports) r.record?.reject(err);
    if (this.fatal) return;
    this.fatal = err;
    for (const r of [...this.pending, ...this.inFlight]) r.record?.reject(err);
    const unsent = reports.length + this.pending.length;
    process.stderr.write(`relay worker: the server refuses this worker (${err.message}); stopping${unsent ? `, ${unsent} outcome(s) not reported` : ""}\n`);
    this.stopping = true;
    for (const entry of this.running) entry.abandoned = true;
    this.running.clear();
    this.pending = [];
    this.graceOver = true;
    this.finishIfIdle();
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
      if (!this.fatal) this.pending.push({ outcome: { id: job.id, token: job.token, outcome: "release" }, tally: "released", leaseForMs: job.leaseForMs });
      return;
    }
    const entry: Running = { job, lost: false, abandoned: false, since: new Date().toISOString() };
    this.running.add(entry);
    this.armBeat(job.leaseForMs);
    const handler = this.handlers.get(job.kind);
    if (!handler) {
      const error = `no handler for kind '${job.kind}' on this worker (queues: ${this.queues.join(", ")})`;
      this.finish(entry, { outcome: { id: job.id, token: job.token, outcome: "nack", error, permanent: true }, tally: "failed", leaseForMs: job.leaseForMs });
      return;
    }
    let result: ReturnType<Handler>;
    try {
      result = handler(job, new JobContext(this.client, job, (name, output) => this.recordStep(job, name, output)));
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

  /**
   * Step `name` of `job` recorded with the other outcomes of a `work` call
   * (one round trip, a shared commit); resolves with its answer, rejects
   * with the error it was answered (`LeaseLost`, `StepBound`...). An outage
   * is waited out, the lease kept by the heartbeats.
   */
  private recordStep(job: LeasedJob, name: string, output: Payload): Promise<{ recorded: boolean; output: Payload }> {
    return new Promise((resolve, reject) => {
      if (this.fatal || this.graceOver || !this.finished) {
        reject(new Unavailable(`job ${job.id}: the worker stopped before step '${name}' was recorded`));
        return;
      }
      if (!(output instanceof Uint8Array)) {
        try {
          JSON.stringify(output);
        } catch (e) {
          reject(new TypeError(`step '${name}': its output cannot be sent as JSON: ${(e as Error).message}`));
          return;
        }
      }
      const outcome: Outcome = { id: job.id, token: job.token, outcome: "step", step: name, output };
      this.pending.push({ outcome, tally: "step", leaseForMs: job.leaseForMs, record: { resolve, reject } });
      this.schedule();
    });
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

  /**
   * Extends in one call the lease of every running job and of every job
   * whose outcome is not reported yet (a report backing off must not find
   * its lease expired); marks the running ones lost.
   */
  private beat(): void {
    this.beatTimer = undefined;
    if (this.fatal) return;
    const held = [...this.running].filter((r) => !r.lost);
    // A step record's job is running: its lease is in `held`.
    const unreported = [...this.pending, ...this.inFlight].filter((r) => !r.record);
    const leases = [
      ...held.map((r) => ({ id: r.job.id, token: r.job.token, leaseForMs: r.job.leaseForMs })),
      ...unreported.map((r) => ({ id: r.outcome.id, token: r.outcome.token, leaseForMs: r.leaseForMs })),
    ];
    if (leases.length === 0) return; // the next job to start arms it again
    this.armBeat(Math.min(...leases.map((l) => l.leaseForMs)));
    if (this.beating) return;
    this.beating = true;
    this.client
      .heartbeat(leases.slice(0, MAX_OUTCOMES), this.leaseForMs)
      .then(
        (answers) => answers.forEach((a, i) => i < held.length && a.error && NOT_OURS.has(a.error.code) && (held[i].lost = true)),
        // Unreachable: the `work` calls say so; the next beat tries again.
        () => undefined,
      )
      .catch((bug) => process.stderr.write(`relay worker: internal error: ${(bug as Error)?.stack ?? bug}\n`))
      .finally(() => (this.beating = false));
  }

  // --- Stopping -------------------------------------------------------------

  /** `graceMs` after the stop: the jobs still running are released, their outcomes dropped. */
  private abandon(): void {
    this.graceTimer = undefined;
    this.graceOver = true;
    for (const entry of this.running) {
      entry.abandoned = true;
      this.pending.push({ outcome: { id: entry.job.id, token: entry.job.token, outcome: "release" }, tally: "released", leaseForMs: entry.job.leaseForMs });
    }
    this.running.clear();
    // One last try now, not after the back-off.
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    this.pump();
  }

  private finishIfIdle(): void {
    if (!this.finished) return;
    if (!this.fatal && (this.running.size || this.pending.length || this.reporting || this.polling)) return;
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
  return { outcome: { id: job.id, token: job.token, outcome: "ack", result: value ?? undefined }, tally: "succeeded", leaseForMs: job.leaseForMs };
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
    return { outcome: { id: outcome.id, token: outcome.token, outcome: "nack", error, permanent: true }, tally: "failed", leaseForMs: report.leaseForMs };
  }
}

function failure(job: LeasedJob, e: unknown): Report {
  const { id, token, leaseForMs } = job;
  if (e instanceof Snooze) return { outcome: { id, token, outcome: "release", inMs: wholeMs(e.delayMs) }, tally: "snoozed", leaseForMs };
  if (e instanceof Join) return { outcome: { id, token, outcome: "join", step: e.step, child: e.child }, tally: "slept", leaseForMs };
  if (e instanceof Wait) return { outcome: { id, token, outcome: "wait", step: e.step, key: e.key, until: new Date(e.untilMs).toISOString() }, tally: "slept", leaseForMs };
  if (e instanceof Sleep) return { outcome: { id, token, outcome: "sleep", step: e.step, until: new Date(e.untilMs).toISOString() }, tally: "slept", leaseForMs };
  const error = cutError(e instanceof Error ? (e.stack ?? String(e)) : String(e));
  if (e instanceof Permanent) return { outcome: { id, token, outcome: "nack", error, permanent: true }, tally: "failed", leaseForMs };
  if (e instanceof Retry) return { outcome: { id, token, outcome: "nack", error, retryInMs: wholeMs(e.delayMs) }, tally: "failed", leaseForMs };
  return { outcome: { id, token, outcome: "nack", error }, tally: "failed", leaseForMs };
}

function checkDelay(ms: number | undefined): void {
  if (ms === undefined) return; // the server's back-off (Retry) or none
  if (typeof ms !== "number" || !Number.isFinite(ms) || ms < 0) throw new RangeError(`a delay must be a finite number of milliseconds, at least 0 (got ${ms})`);
}

/** `ms` whole, at least 0, at most `max` (a value NaN is 0). */
function clampMs(ms: number, max: number): number {
  if (Number.isNaN(ms)) return 0;
  return Math.min(max, Math.max(0, Math.round(ms)));
}

/**
 * A delay the server takes (whole, not negative, at most its maximum): one
 * it refuses would fail the whole batch it travels in.
 */
function wholeMs(ms: number): number | undefined {
  return Number.isNaN(ms) ? undefined : clampMs(ms, MAX_DELAY_MS);
}

/** An error text cut to the server's limit, on a character boundary. */
function cutError(text: string): string {
  const bytes = Buffer.from(text, "utf8");
  if (bytes.length <= MAX_ERROR_BYTES) return text;
  let end = MAX_ERROR_BYTES;
  while (end > 0 && (bytes[end] & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString("utf8");
}
