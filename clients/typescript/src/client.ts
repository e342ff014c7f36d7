/**
 * A client of Relay's HTTP API (`relay serve`), on Node's `http` module
 * with persistent keep-alive connections.
 *
 * Payloads and results are bytes on the server, JSON by convention. A JSON
 * value given here comes back as that value; a `Uint8Array` travels as
 * base64 and comes back as a `Uint8Array`; `undefined`/`null` is none.
 */

import { RelayError, errorFor } from "./errors.js";
import { Transport } from "./transport.js";

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Payload = Json | Uint8Array | undefined;

/** A job to submit. Times are in milliseconds. */
export interface NewJob {
  queue: string;
  kind: string;
  payload?: Payload;
  priority?: number;
  delayMs?: number;
  runAt?: string;
  maxAttempts?: number;
  uniqueKey?: string;
  leaseForMs?: number;
  timeoutMs?: number;
  dependsOn?: number[];
  onDependencyFailure?: "cancel" | "run";
  /** The W3C trace context the job continues, handed to its workers. */
  traceparent?: string;
  /** Short labels to find the job by (at most 8). */
  tags?: string[];
  /**
   * The group (a tenant, a customer; 1-256 characters) the job belongs to:
   * the queue's claims take groups in turn (one job of each group with jobs
   * READY a round), and its `maxLeasedPerGroup` bounds each group's leases.
   */
  group?: string;
  /**
   * Makes the submit safe to repeat: for 24 h a submit with this key (1-256
   * characters) answers the first one's job and creates nothing, whatever
   * state that job is in.
   */
  idempotencyKey?: string;
  /**
   * At most one job per `uniqueKey` per this many milliseconds: within it a
   * throttled submit of the key answers that job, even once it has finished.
   */
  throttleMs?: number;
  /**
   * Runs the job this many milliseconds after the last submit of its
   * `uniqueKey`: while the key's job has not started, a debounced submit
   * replaces its payload and moves its run time to now + `debounceMs`
   * (answering the job, `existing`). Not with `delayMs`, `runAt` or
   * `throttleMs`.
   */
  debounceMs?: number;
}

/** What `submitJob` answers: the job's id, and whether it existed already. */
export interface Submitted {
  id: number;
  /**
   * True when the submit made no job: an earlier submit with its
   * `idempotencyKey` had, or an unfinished job holds its `uniqueKey`.
   */
  existing: boolean;
}

/** Options of `submitBatch`. */
export interface BatchOptions {
  /**
   * Sent as the `Idempotency-Key` header: each job without a key of its own
   * gets `key/0`, `key/1`, ... (by its index), so the same batch again
   * within 24 h answers the same ids and creates nothing.
   */
  idempotencyKey?: string;
}

/** A job this worker holds under `token`. */
export interface LeasedJob {
  id: number;
  token: number;
  queue: string;
  kind: string;
  priority: number;
  attempt: number;
  maxAttempts: number;
  leaseExpiresAt: string;
  leaseForMs: number;
  timeoutMs: number | null;
  payload: Payload;
  /** The W3C trace context the job was submitted in, or null. */
  traceparent: string | null;
  /** The group (tenant) it belongs to; absent when none. */
  group?: string;
  /** The steps earlier runs of the job recorded (a worker's handler returns their outputs instead of running them again); absent when none. */
  steps?: Step[];
}

/** A step a job's handler recorded: `output` a JSON value, or bytes. */
export interface Step {
  name: string;
  attempt: number;
  /** When it was recorded (RFC 3339). */
  at: string;
  /** Bytes of its output. */
  bytes: number;
  output: Payload;
}

/** A job as the server reads it back (`raw` holds every field). */
export interface Job {
  id: number;
  queue: string;
  kind: string;
  state: string;
  priority: number;
  attempts: number;
  maxAttempts: number;
  lastError: string | null;
  waitingOn: number;
  traceparent: string | null;
  tags: string[];
  /** The group (tenant) it belongs to; absent when none. */
  group?: string;
  /** What its handler last reported of its run (`progress`); absent until one does. */
  progress?: Progress;
  /** The steps its handlers recorded, in the order recorded; absent when none. */
  steps?: Step[];
  payload: Payload;
  result: Payload;
  raw: Record<string, unknown>;
}

/** A job's last progress report: `fraction` from 0 to 1, `at` RFC 3339, the `attempt` that made it. */
export interface Progress {
  fraction: number;
  message?: string;
  at: string;
  attempt: number;
}

export interface LeaseOptions {
  max?: number;
  leaseForMs?: number;
  waitMs?: number;
  worker?: string;
}

/** A lease request: the queues to lease from and how (see `lease`). */
export interface LeaseRequest extends LeaseOptions {
  queues: string[];
}

/**
 * The outcome of a job held under `token`, for `work`: `ack` (succeeded,
 * with an optional result), `nack` (failed: RETRYING for `retryInMs` or
 * the back-off, then READY; DEAD when spent or `permanent`) or `release`
 * (back to READY untried; with `inMs`, SCHEDULED until then: a snooze).
 */
export type Outcome =
  | { id: number; token: number; outcome: "ack"; result?: Payload }
  | { id: number; token: number; outcome: "nack"; error: string; retryInMs?: number; permanent?: boolean }
  | { id: number; token: number; outcome: "release"; inMs?: number }
  | { id: number; token: number; outcome: "sleep"; step: string; until: string }
  | { id: number; token: number; outcome: "wait"; step: string; key: string; until: string }
  /** Step `step` recorded with `output`, the job still leased (as `recordStep`). */
  | { id: number; token: number; outcome: "step"; step: string; output?: Payload }
  /** Awaiting job `child`'s end under step `step`: WAITING, holding no lease, until the child's end records how it ended. */
  | { id: number; token: number; outcome: "join"; step: string; child: number };

/**
 * The answer for one outcome: its job's new `state` (and `readyAt` when it
 * is due again), or the `error` that kept it from being applied (the class
 * the per-job call would throw: `LeaseLost`, `InvalidState`, `NotFound`,
 * `InvalidInput`), returned, not thrown.
 */
export type OutcomeAnswer =
  /** `earlier`: for a step record whose name was recorded already, the record that stands (this one was not taken). */
  | { id: number; state: string; readyAt: string | null; error?: undefined; earlier?: Step }
  | { id: number; error: RelayError; state?: undefined; readyAt?: undefined };

/** A completion token made for a leased job (`createToken`). */
export interface TokenCreated {
  id: string;
  /** What completes it: `<id>.<secret>`. */
  token: string;
  /** The path that completes it (`POST`, below the server's address). */
  path: string;
  /** The event key its completion emits. */
  key: string;
  /** When it expires (RFC 3339). */
  expiresAt: string;
}

/** What `work` answers: one item per outcome, in order, and the jobs leased. */
export interface WorkAnswer {
  outcomes: OutcomeAnswer[];
  jobs: LeasedJob[];
}

/** A page of queues' stats: see `Client.statsPage`. */
export interface StatsPage {
  /** Each queue's counts by state and its settings, by name. */
  queues: Record<string, Obj>;
  /** The `after` of the next page; null after the last. */
  next: string | null;
  /** Over every queue (`jobs` by state, `queues`, `paused`); first page only. */
  totals: { jobs: Record<string, number>; queues: number; paused: number } | null;
}

/** A lease to extend, for `heartbeat`; `leaseForMs` overrides the call's. */
export interface HeldLease {
  id: number;
  token: number;
  leaseForMs?: number;
}

/** The answer for one lease: its new expiry, or why it is not ours (returned). */
export type HeartbeatAnswer =
  | { id: number; leaseExpiresAt: string; error?: undefined }
  | { id: number; error: RelayError; leaseExpiresAt?: undefined };

/** Which jobs a search (`listJobs`) or a bulk action (`bulk`) takes: every filter given must match. */
export interface JobFilter {
  queue?: string;
  state?: string;
  kind?: string;
  tag?: string;
  /** Created at or after (RFC 3339). */
  since?: string;
  /** Created before (RFC 3339). */
  until?: string;
  /** The last error contains this text. */
  errorContains?: string;
}

/** A page of `listJobs`, newest first: `next` is the next page's `before`, null after the last. */
export interface JobPage {
  jobs: Job[];
  next: number | null;
}

/** DEAD jobs of one queue and kind that failed with the same first line of error. */
export interface DeadGroup {
  queue: string;
  kind: string;
  error: string;
  count: number;
  /** The newest one's id. */
  newest: number;
  lastAt: string;
}

/** A page of queue names: see `Client.queuesPage`. */
export interface QueuesPage {
  queues: string[];
  /** The `after` of the next page; null after the last. */
  next: string | null;
}

/** At most `limit` leases per `perMs` milliseconds. */
export interface RateLimit {
  limit: number;
  perMs: number;
}

/** A queue's limits (null: no such limit). */
export interface QueueLimits {
  queue: string;
  maxLeased: number | null;
  rateLimit: RateLimit | null;
  /** A job whose lease expires this many times is DEAD (null: the server's default, 3). */
  poisonAfter: number | null;
  /** At most this many jobs of one group LEASED at once; absent when none. */
  maxLeasedPerGroup?: number;
}

/** How long a finished job is kept: milliseconds after it finished (0: at the next prune), or `"forever"`. */
export type Keep = number | "forever";

/** A queue's own retention by final state (left out or null: the server's default; answers leave such a state out). */
export interface Retention {
  succeeded?: Keep | null;
  dead?: Keep | null;
  cancelled?: Keep | null;
}

/** How long a queue keeps its finished jobs: its own setting, and what the prune keeps (its own, else the server's default). */
export interface QueueRetention {
  queue: string;
  own: Retention;
  effective: { succeeded: Keep; dead: Keep; cancelled: Keep };
}

/** One pass of the prune: jobs deleted, and the next pass's `after` (null at the last job). */
export interface Pruned {
  deleted: number;
  next: number | null;
}

/** The job each tick of a schedule enqueues. */
export interface JobTemplate {
  queue: string;
  kind: string;
  payload?: Payload;
  priority?: number;
  maxAttempts?: number;
  /** The group (a tenant) of each tick's job: see `submit`. */
  group?: string;
}

/** A schedule of periodic jobs: `cron` (in `tz`) or `everyMs`, and its times (RFC 3339). */
export interface Schedule {
  name: string;
  cron: string | null;
  tz: string | null;
  everyMs: number | null;
  job: JobTemplate;
  paused: boolean;
  createdAt: string;
  nextAt: string;
  lastAt: string | null;
}

/** When a schedule ticks: a cron expression (with an IANA time zone, UTC by default), or every `everyMs`. */
export type When = { cron: string; tz?: string; everyMs?: undefined } | { everyMs: number; cron?: undefined; tz?: undefined };

/** The server's health: `failing` while its store takes no writes (`stopped` after a failed fsync). */
export interface Health {
  status: "ok" | "failing";
  stopped?: boolean;
  error?: string | null;
  since?: string | null;
}

type Obj = Record<string, any>;

/**
 * An answer object with its keys in camelCase, every field as the server
 * named it (so each is spelled once, in its interface): a payload or result
 * decoded (a JSON value, or bytes from `*_base64`).
 */
function camel(v: any): any {
  if (Array.isArray(v)) return v.map(camel);
  if (v === null || typeof v !== "object") return v;
  const out: Obj = {};
  for (const k in v) {
    const x = v[k];
    if (k === "payload_base64" || k === "result_base64" || k === "output_base64") {
      if (typeof x === "string") out[k.slice(0, -7)] = new Uint8Array(Buffer.from(x, "base64"));
    } else if (k === "payload" || k === "result" || k === "output") {
      // As stored, never renamed inside; bytes (`*_base64`) win.
      if (!(out[k] instanceof Uint8Array)) out[k] = x;
    } else {
      out[camelName(k)] = typeof x === "object" && x !== null ? camel(x) : x;
    }
  }
  return out;
}

const camelNames = new Map<string, string>();

/** A snake_case name in camelCase, remembered (the answers' names are few: a worker reads thousands of leased jobs a second). */
function camelName(k: string): string {
  if (!k.includes("_")) return k;
  let c = camelNames.get(k);
  if (c === undefined) {
    c = k.replace(/_([a-z])/g, (_, ch: string) => ch.toUpperCase());
    if (camelNames.size < 1024) camelNames.set(k, c);
  }
  return c;
}

/** `path` with the parameters that are given, in snake_case. */
function withQuery(path: string, params: Obj): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null) q.set(k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`), String(v));
  }
  const query = q.toString();
  return query ? `${path}?${query}` : path;
}

/** A filter's fields in snake_case, those given. */
function filterBody(f: JobFilter): Obj {
  const out: Obj = {};
  for (const [k, v] of Object.entries(f)) if (v !== undefined && v !== null) out[k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)] = v;
  return out;
}

/** A queue's or schedule's name as one path segment. */
const seg = encodeURIComponent;

/** A bulk action is never cut off by the server; the client waits as long. */
const NO_TIMEOUT_MS = 24 * 3600_000;

/**
 * A `work` answer that does not match the call (not one answer per
 * outcome): thrown, with the `jobs` it leased (to run or release: they are
 * held until their leases expire otherwise).
 */
export class BadAnswer extends RelayError {
  constructor(message: string, readonly jobs: LeasedJob[]) {
    super(message, "bad_answer");
  }
}

/**
 * Whether a request may be sent again when a reused connection failed
 * before any answer byte (the server may have processed it): reads,
 * deletes, the calls keyed by a lease token or made idempotent by the
 * server, a submit with an idempotency key or a unique key, and a batch
 * whose every job is keyed (by the `Idempotency-Key` header or its own).
 */
function safeToRepeat(method: string, path: string, body?: Obj, headers: Record<string, string> = {}): boolean {
  if (method === "GET" || method === "DELETE" || method === "PUT") return true;
  if (method !== "POST") return false;
  if (path === "/v1/work" || path === "/v1/heartbeat") return true;
  if (/^\/v1\/(queues|schedules)\/[^/]+\/(pause|resume)$/.test(path)) return true;
  if (/^\/v1\/jobs\/\d+\/(ack|nack|release|extend|cancel|retry|steps)$/.test(path)) return true;
  if (path === "/v1/jobs") return typeof body?.idempotency_key === "string" || typeof body?.unique_key === "string";
  if (path === "/v1/jobs/batch") {
    if (typeof headers["idempotency-key"] === "string") return true;
    const jobs: Obj[] = Array.isArray(body?.jobs) ? body.jobs : [];
    return jobs.length > 0 && jobs.every((j) => typeof j.idempotency_key === "string");
  }
  return false;
}

function putPayload(body: Obj, name: string, value: Payload): void {
  if (value === undefined || value === null) return;
  if (value instanceof Uint8Array) {
    body[`${name}_base64`] = Buffer.from(value).toString("base64");
  } else {
    body[name] = value;
  }
}

function jobBody(j: NewJob): Obj {
  const body: Obj = { queue: j.queue, kind: j.kind };
  putPayload(body, "payload", j.payload);
  const optional: [string, unknown][] = [
    ["priority", j.priority],
    ["delay_ms", j.delayMs],
    ["run_at", j.runAt],
    ["max_attempts", j.maxAttempts],
    ["unique_key", j.uniqueKey],
    ["idempotency_key", j.idempotencyKey],
    ["throttle_ms", j.throttleMs],
    ["debounce_ms", j.debounceMs],
    ["lease_for_ms", j.leaseForMs],
    ["timeout_ms", j.timeoutMs],
    ["depends_on", j.dependsOn?.length ? j.dependsOn : undefined],
    ["on_dependency_failure", j.onDependencyFailure],
    ["traceparent", j.traceparent],
    ["tags", j.tags?.length ? j.tags : undefined],
    ["group", j.group],
  ];
  for (const [k, v] of optional) if (v !== undefined) body[k] = v;
  return body;
}

function leaseBody(queues: string[], options: LeaseOptions): Obj {
  const body: Obj = {
    queues,
    max: options.max ?? 1,
    lease_for_ms: options.leaseForMs ?? 30_000,
    wait_ms: options.waitMs ?? 0,
  };
  if (options.worker !== undefined) body.worker = options.worker;
  return body;
}

function outcomeBody(o: Outcome): Obj {
  const body: Obj = { id: o.id, token: o.token, outcome: o.outcome };
  switch (o.outcome) {
    case "ack":
      putPayload(body, "result", o.result);
      break;
    case "nack":
      body.error = o.error;
      if (o.retryInMs !== undefined) body.retry_in_ms = o.retryInMs;
      if (o.permanent !== undefined) body.permanent = o.permanent;
      break;
    case "release":
      if (o.inMs !== undefined) body.in_ms = o.inMs;
      break;
    case "sleep":
      body.step = o.step;
      body.until = o.until;
      break;
    case "wait":
      body.step = o.step;
      body.key = o.key;
      body.until = o.until;
      break;
    case "step":
      body.step = o.step;
      putPayload(body, "output", o.output);
      break;
    case "join":
      body.step = o.step;
      body.child = o.child;
      break;
  }
  return body;
}

/** The longest one long-poll of `result` waits: below the server's default `--max-wait` (60 s). */
const RESULT_WAIT_MS = 30_000;

/** An item's error as the class its code names; no HTTP status of its own. */
function itemError(e: Obj): RelayError {
  return errorFor(undefined, String(e.code), String(e.message));
}

function outcomeAnswer(v: Obj): OutcomeAnswer {
  if (v.error) return { id: v.id, error: itemError(v.error) };
  const answer: OutcomeAnswer = { id: v.id, state: v.state, readyAt: v.ready_at ?? null };
  if (v.earlier) answer.earlier = camel(v.earlier) as Step;
  return answer;
}

function heartbeatAnswer(v: Obj): HeartbeatAnswer {
  if (v.error) return { id: v.id, error: itemError(v.error) };
  return { id: v.id, leaseExpiresAt: v.lease_expires_at };
}

/** A leased job, every field as the server names it, in camelCase (spelled once, in `LeasedJob`). */
function leased(v: Obj): LeasedJob {
  const job = camel(v);
  // A server older than these fields leaves them out.
  job.leaseForMs ??= 30_000;
  job.timeoutMs ??= null;
  job.traceparent ??= null;
  return job;
}

function job(v: Obj): Job {
  // Every field as the server names it, in camelCase (`raw` keeps the answer).
  return { ...camel(v), raw: v };
}

/**
 * Relay's HTTP API. Every error the server answers throws the class of
 * `errors.ts` named after its code; a server that does not answer throws
 * `Unavailable`.
 *
 * ```ts
 * const client = new Client("http://127.0.0.1:7433", { token: "secret" });
 * const id = await client.submit({ queue: "emails", kind: "send", payload: { to: "ada@example.com" } });
 * ```
 */
export class Client {
  readonly url: string;
  readonly token?: string;
  readonly timeoutMs: number;
  private readonly transport: Transport;

  constructor(url: string, options: { token?: string; timeoutMs?: number } = {}) {
    this.url = url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
    this.transport = new Transport(this.url, this.token);
  }

  /** Closes the idle keep-alive connections (they never keep Node running). */
  close(): void {
    this.transport.close();
  }

  private async call(method: string, path: string, body?: Obj, timeoutMs?: number, headers: Record<string, string> = {}): Promise<any> {
    const text = body === undefined ? undefined : JSON.stringify(body);
    const res = await this.transport.request(method, path, text, timeoutMs ?? this.timeoutMs, safeToRepeat(method, path, body, headers), headers);
    if (res.status >= 200 && res.status < 300) return res.text ? JSON.parse(res.text) : null;
    throw this.refused(method, path, res);
  }

  /** An error answer as the class its code names (or a `RelayError` when it is not Relay's). */
  private refused(method: string, path: string, res: { status: number; text: string }): RelayError {
    let err: Obj | undefined;
    try {
      err = JSON.parse(res.text).error;
    } catch {
      err = undefined;
    }
    if (err && typeof err.code === "string") return errorFor(res.status, err.code, String(err.message));
    return new RelayError(`${method} ${path}: HTTP ${res.status} without a Relay error body: ${res.text.slice(0, 200)}`, "error", res.status);
  }

  /**
   * Submits one job; returns its id (for an `idempotencyKey` seen in the
   * last 24 h, or a `uniqueKey` an unfinished job holds, that job's id).
   * Durable when it resolves. `submitJob` also says whether it existed.
   */
  async submit(job: NewJob): Promise<number> {
    return (await this.submitJob(job)).id;
  }

  /**
   * Submits one job, as `submit`; resolves with its id and `existing`: true
   * when no job was made (its `idempotencyKey` or `uniqueKey` found one).
   */
  async submitJob(job: NewJob): Promise<Submitted> {
    const v = await this.call("POST", "/v1/jobs", jobBody(job));
    return { id: v.id, existing: v.existing === true };
  }

  /**
   * Submits 1-10,000 jobs in one call, all or none; returns their ids. With
   * `idempotencyKey` the batch is safe to repeat (see `BatchOptions`).
   */
  async submitBatch(jobs: NewJob[], options: BatchOptions = {}): Promise<number[]> {
    const headers: Record<string, string> = options.idempotencyKey === undefined ? {} : { "idempotency-key": options.idempotencyKey };
    return (await this.call("POST", "/v1/jobs/batch", { jobs: jobs.map(jobBody) }, undefined, headers)).ids;
  }

  /** Leases up to `max` jobs, waiting up to `waitMs` for one (a long-poll). */
  async lease(queues: string[], options: LeaseOptions = {}): Promise<LeasedJob[]> {
    const v = await this.call("POST", "/v1/lease", leaseBody(queues, options), this.timeoutMs + (options.waitMs ?? 0));
    return (v.jobs as Obj[]).map(leased);
  }

  /**
   * Reports many jobs' outcomes and leases the next jobs, in one call and
   * one commit (the outcomes first, so the slots they free can be leased).
   * Each outcome is answered on its own (an error in its answer item, not
   * thrown); the call throws only when nothing was applied (or, for
   * `MaybeApplied`, may have been). `lease.waitMs` is a long-poll only
   * when `outcomes` is empty. Repeating a call is safe: an ack repeated
   * with its token is answered with its state again.
   */
  async work(outcomes: Outcome[], lease?: LeaseRequest): Promise<WorkAnswer> {
    const body: Obj = { outcomes: outcomes.map(outcomeBody) };
    if (lease) body.lease = leaseBody(lease.queues, lease);
    const v = await this.call("POST", "/v1/work", body, this.timeoutMs + (lease?.waitMs ?? 0));
    // The jobs first: a worker that gets them can release them even when
    // the rest of the answer is wrong.
    const jobs = Array.isArray(v?.jobs) ? (v.jobs as Obj[]).map(leased) : [];
    const answers = Array.isArray(v?.outcomes) ? (v.outcomes as Obj[]) : undefined;
    if (answers === undefined || answers.length !== outcomes.length) {
      throw new BadAnswer(`POST /v1/work: ${answers?.length ?? "no"} outcome answer(s) for ${outcomes.length} outcome(s)`, jobs);
    }
    return { outcomes: answers.map(outcomeAnswer), jobs };
  }

  /**
   * Extends many leases at once, each to its own `leaseForMs` (else this
   * call's) from now. One answer per lease, in order; an error there
   * (`LeaseLost`, `InvalidState`, `NotFound`) means the job is no longer
   * this worker's.
   */
  async heartbeat(leases: HeldLease[], leaseForMs = 30_000): Promise<HeartbeatAnswer[]> {
    const items = leases.map((l) => (l.leaseForMs === undefined ? { id: l.id, token: l.token } : { id: l.id, token: l.token, lease_for_ms: l.leaseForMs }));
    const v = await this.call("POST", "/v1/heartbeat", { leases: items, lease_for_ms: leaseForMs });
    const answers = Array.isArray(v?.leases) ? (v.leases as Obj[]) : undefined;
    if (answers === undefined || answers.length !== leases.length) {
      throw new RelayError(`POST /v1/heartbeat: ${answers?.length ?? "no"} answer(s) for ${leases.length} lease(s)`, "bad_answer");
    }
    return answers.map(heartbeatAnswer);
  }

  /** Reports success (repeating it with the same token is answered Ok). */
  async ack(id: number, token: number, result?: Payload): Promise<void> {
    const body: Obj = { token };
    putPayload(body, "result", result);
    await this.call("POST", `/v1/jobs/${id}/ack`, body);
  }

  /** Reports failure: RETRYING for `retryInMs` (or the back-off), then READY; DEAD when spent or `permanent`. */
  async nack(id: number, token: number, error: string, options: { retryInMs?: number; permanent?: boolean } = {}): Promise<void> {
    const body: Obj = { token, error, permanent: options.permanent ?? false };
    if (options.retryInMs !== undefined) body.retry_in_ms = options.retryInMs;
    await this.call("POST", `/v1/jobs/${id}/nack`, body);
  }

  /** Extends the lease to `leaseForMs` from now; returns the new expiry. */
  async extend(id: number, token: number, leaseForMs = 30_000): Promise<string> {
    return (await this.call("POST", `/v1/jobs/${id}/extend`, { token, lease_for_ms: leaseForMs })).lease_expires_at;
  }

  /**
   * Reports how far along a leased job is (`fraction` from 0 to 1, and what
   * the handler is doing, at most 1,024 characters): kept on the job
   * (`Job.progress`, shown by the dashboard and `relay show`) and logged as
   * a "progress" event. From a handler:
   * `await client.progress(job.id, job.token, 0.5, "page 2 of 4")`.
   */
  async progress(id: number, token: number, fraction: number, message?: string): Promise<void> {
    const body: Obj = { token, fraction };
    if (message !== undefined) body.message = message;
    await this.call("POST", `/v1/jobs/${id}/progress`, body);
  }

  /**
   * Records the output of step `name` of a leased job under its lease (a
   * JSON value, or bytes): kept on the job and given with every later lease
   * of it. Answers `{recorded: true, output}` when recorded, or
   * `{recorded: false, output: earlier}` when a record of the name stood
   * already (the first wins; go on with `earlier`). Throws `LeaseLost` when
   * the lease is no longer valid (nothing recorded), `StepBound` past the
   * job's 1,000 steps or 1 MiB of output. A worker's handler records its
   * steps with `ctx.step`.
   */
  async recordStep(id: number, token: number, name: string, output?: Payload): Promise<{ recorded: boolean; output: Payload }> {
    const body: Obj = { token, name };
    putPayload(body, "output", output);
    const v = await this.call("POST", `/v1/jobs/${id}/steps`, body);
    if (v.recorded) return { recorded: true, output };
    const earlier = camel(v.earlier ?? {});
    return { recorded: false, output: earlier.output ?? null };
  }

  /**
   * Emits event `key` with `payload` (a JSON value, or bytes; at most 64
   * KiB): every job waiting for the key gets the payload and runs on, in
   * this commit. The first emit of a key stands; the event is kept 7 days,
   * so a wait that begins later returns it at once.
   */
  async emit(key: string, payload?: Payload): Promise<{ first: boolean; woken: number }> {
    const body: Obj = {};
    putPayload(body, "payload", payload);
    return await this.call("POST", `/v1/events/${encodeURIComponent(key)}`, body);
  }

  /**
   * Makes a completion token for a leased job, open for `timeoutMs`:
   * `{id, token, path, key, expiresAt}`. Whoever holds `token` completes it
   * once, without an API token (`completeToken`, or `POST` to `path`). A
   * worker's handler makes one with `ctx.token`.
   */
  async createToken(id: number, token: number, timeoutMs: number): Promise<TokenCreated> {
    const v = await this.call("POST", `/v1/jobs/${id}/tokens`, { token, timeout_ms: Math.max(1, Math.round(timeoutMs)) });
    return { id: v.id, token: v.token, path: v.path, key: v.key, expiresAt: v.expires_at };
  }

  /**
   * Completes a completion token (its `<id>.<secret>`, or the URL that
   * carries it) with `payload` (a JSON value, at most 64 KiB): the job
   * waiting for it runs on with it. Needs no API token. Rejects with
   * `TokenUnknown`, `TokenUsed`, `TokenExpired` or `TokenClosed`.
   */
  async completeToken(token: string, payload?: Json): Promise<{ completed: boolean; woken: number }> {
    const text = token.includes("/v1/tokens/") ? token.split("/v1/tokens/")[1].split("/")[0] : token;
    return await this.call("POST", `/v1/tokens/${encodeURIComponent(text)}/complete`, (payload ?? null) as Obj);
  }

  /** Gives the job back untried; with `inMs`, SCHEDULED until then (a snooze). */
  async release(id: number, token: number, inMs?: number): Promise<void> {
    const body: Obj = { token };
    if (inMs !== undefined) body.in_ms = inMs;
    await this.call("POST", `/v1/jobs/${id}/release`, body);
  }

  async cancel(id: number): Promise<void> {
    await this.call("POST", `/v1/jobs/${id}/cancel`, {});
  }

  /** Runs a DEAD or CANCELLED job again; its recorded steps are kept (it goes on after the last one) unless `resetSteps`. */
  async retry(id: number, options: { resetSteps?: boolean } = {}): Promise<void> {
    await this.call("POST", `/v1/jobs/${id}/retry${options.resetSteps ? "?reset_steps=true" : ""}`, {});
  }

  async delete(id: number): Promise<void> {
    await this.call("DELETE", `/v1/jobs/${id}`);
  }

  async get(id: number): Promise<Job> {
    return job(await this.call("GET", `/v1/jobs/${id}`));
  }

  /**
   * Awaits the job's end for at most `timeoutMs`: the job once it is
   * SUCCEEDED, DEAD or CANCELLED (its `result`, its `lastError`), or `null`
   * when it had not ended by then. Long-polls `GET /v1/jobs/{id}/result`
   * (30 s a call), woken by the commit that ends the job. Rejects with
   * `NotFound` for an unknown job.
   */
  async result(id: number, timeoutMs = 30_000): Promise<Job | null> {
    const deadline = Date.now() + Math.max(0, timeoutMs);
    for (;;) {
      const left = Math.max(0, deadline - Date.now());
      const waitMs = Math.min(left, RESULT_WAIT_MS);
      const j = job(await this.call("GET", `/v1/jobs/${id}/result?wait_ms=${waitMs}`, undefined, this.timeoutMs + waitMs));
      if (j.state === "SUCCEEDED" || j.state === "DEAD" || j.state === "CANCELLED") return j;
      if (left === 0) return null;
    }
  }

  /** The job's event log, oldest first (every page of it). */
  async events(id: number): Promise<Obj[]> {
    const out: Obj[] = [];
    let after: number | undefined;
    for (;;) {
      const page = await this.eventsPage(id, { after });
      out.push(...page.events);
      if (page.next === null || page.next === undefined) return out;
      after = page.next;
    }
  }

  /**
   * A page of the job's event log: `events` after `seq` `after`, at most `limit`
   * (1-1000) and 4 MiB of them, and `next`, the next page's `after` (null on the
   * last page).
   */
  async eventsPage(
    id: number,
    opts: { after?: number; limit?: number } = {},
  ): Promise<{ events: Obj[]; next: number | null }> {
    const q = new URLSearchParams();
    if (opts.after !== undefined) q.set("after", String(opts.after));
    if (opts.limit !== undefined) q.set("limit", String(opts.limit));
    const qs = q.toString();
    const page = await this.call("GET", `/v1/jobs/${id}/events${qs ? `?${qs}` : ""}`);
    return { events: page.events, next: page.next ?? null };
  }

  /** Appends an event of your own to the job's log; returns its number. */
  async appendEvent(id: number, kind: string, data: Json = {}): Promise<number> {
    return (await this.call("POST", `/v1/jobs/${id}/events`, { kind, data })).seq;
  }

  /**
   * Counts of every queue's jobs by state, and its settings, read a page of
   * queues at a time (see `statsPage`).
   */
  async stats(): Promise<Record<string, Obj>> {
    const queues: Record<string, Obj> = {};
    let after: string | undefined;
    for (;;) {
      const page = await this.statsPage({ after });
      Object.assign(queues, page.queues);
      if (page.next == null) return queues;
      after = page.next;
    }
  }

  /**
   * One page of queues' stats, in name order after `after`: up to `limit`
   * (1-1000, the server's 1000 when left out). `next` is the `after` of the
   * next page (null after the last); `totals` over every queue come with the
   * first page only.
   */
  async statsPage(page: { after?: string; limit?: number } = {}): Promise<StatsPage> {
    const q = new URLSearchParams();
    if (page.after !== undefined) q.set("after", page.after);
    if (page.limit !== undefined) q.set("limit", String(page.limit));
    const query = q.toString();
    const v = await this.call("GET", query ? `/v1/stats?${query}` : "/v1/stats");
    return { queues: v.queues, next: v.next ?? null, totals: v.totals ?? null };
  }

  /** The newest jobs, filtered by queue and state (the first page of `listJobs`). */
  async jobs(filter: { queue?: string; state?: string; limit?: number } = {}): Promise<Job[]> {
    // An empty queue or state is no filter (a form's "any").
    const given = { queue: filter.queue || undefined, state: filter.state || undefined };
    return (await this.listJobs({ ...given, limit: filter.limit ?? 100 })).jobs;
  }

  /**
   * A page of jobs, newest first, that match every filter given. Pass the
   * page's `next` as `before` for the next page (or use `iterJobs`).
   */
  async listJobs(filter: JobFilter & { before?: number; limit?: number } = {}): Promise<JobPage> {
    const v = await this.call("GET", withQuery("/v1/jobs", filter));
    return { jobs: (v.jobs as Obj[]).map(job), next: v.next ?? null };
  }

  /** Every job that matches `filter`, newest first, read a page at a time. */
  async *iterJobs(filter: JobFilter & { before?: number; limit?: number } = {}): AsyncGenerator<Job> {
    let before = filter.before;
    for (;;) {
      const page = await this.listJobs({ ...filter, before });
      yield* page.jobs;
      if (page.next === null) return;
      before = page.next;
    }
  }

  /**
   * Retries, cancels or deletes every job that matches `filter` (at least
   * one field; jobs whose state does not allow the action are passed over);
   * resolves with how many it changed. Not cut off by the client's timeout:
   * it may run for minutes on a million jobs.
   */
  async bulk(action: "retry" | "cancel" | "delete", filter: JobFilter): Promise<number> {
    return (await this.call("POST", "/v1/jobs/bulk", { action, filter: filterBody(filter) }, NO_TIMEOUT_MS)).count;
  }

  /** The newest DEAD jobs grouped by queue, kind and the first line of their error, the largest groups first. */
  async deadGroups(options: { limit?: number } = {}): Promise<DeadGroup[]> {
    return camel((await this.call("GET", withQuery("/v1/dead", options))).groups);
  }

  /** Every queue's name (with jobs, paused or limited), in byte order, read a page at a time. */
  async queues(): Promise<string[]> {
    const names: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.queuesPage({ after });
      names.push(...page.queues);
      if (page.next === null) return names;
      after = page.next;
    }
  }

  /** One page of queue names after `after` (up to `limit`, 1-1000). */
  async queuesPage(page: { after?: string; limit?: number } = {}): Promise<QueuesPage> {
    const v = await this.call("GET", withQuery("/v1/queues", page));
    return { queues: v.queues, next: v.next ?? null };
  }

  /**
   * One queue: its jobs by state (`READY`, `SCHEDULED`, `RETRYING`, `DEAD` ...), `oldest_ready_age_ms`,
   * `paused`, `max_leased` and `rate_limit`, as `stats` gives each queue
   * (every count zero for a queue nothing has used).
   */
  async getQueue(queue: string): Promise<Obj> {
    return await this.call("GET", `/v1/queues/${seg(queue)}`);
  }

  /**
   * Pauses the queue: none of its jobs is leased (by any process on the
   * store) until `resumeQueue`; submits and completions go on. Resolves
   * with true (paused).
   */
  async pauseQueue(queue: string): Promise<boolean> {
    return (await this.call("POST", `/v1/queues/${seg(queue)}/pause`, {})).paused;
  }

  /** Resumes a paused queue; resolves with false (not paused). */
  async resumeQueue(queue: string): Promise<boolean> {
    return (await this.call("POST", `/v1/queues/${seg(queue)}/resume`, {})).paused;
  }

  /**
   * Replaces the queue's limits: at most `maxLeased` of its jobs LEASED at
   * once, at most `rateLimit.limit` leases per `rateLimit.perMs`; one left
   * out is lifted. A job whose lease expires `poisonAfter` times (its handler
   * crashes or hangs its worker) is DEAD, whatever attempts it has left
   * (left out: the server's default, 3; 0: never by expiries alone). At most
   * `maxLeasedPerGroup` jobs of one group (`submit({ group })`) LEASED at once.
   */
  async setQueueLimits(
    queue: string,
    limits: { maxLeased?: number; rateLimit?: RateLimit; poisonAfter?: number; maxLeasedPerGroup?: number } = {},
  ): Promise<QueueLimits> {
    const body: Obj = {
      max_leased: limits.maxLeased ?? null,
      rate_limit: limits.rateLimit ? { limit: limits.rateLimit.limit, per_ms: limits.rateLimit.perMs } : null,
    };
    // Left out otherwise: a server older than the field refuses it.
    if (limits.poisonAfter !== undefined) body.poison_after = limits.poisonAfter;
    if (limits.maxLeasedPerGroup !== undefined) body.max_leased_per_group = limits.maxLeasedPerGroup;
    return camel(await this.call("PUT", `/v1/queues/${seg(queue)}/limits`, body));
  }

  /** How long the queue keeps its finished jobs, by final state. */
  async getRetention(queue: string): Promise<QueueRetention> {
    return camel(await this.call("GET", `/v1/queues/${seg(queue)}/retention`));
  }

  /**
   * Replaces how long the queue keeps its finished jobs, by final state:
   * milliseconds after a job finished, `"forever"`, or left out (the
   * server's default). Stored with the queue and followed by every
   * process's prune, for jobs that finished before too.
   */
  async setRetention(queue: string, retention: Retention = {}): Promise<QueueRetention> {
    const body = {
      succeeded: retention.succeeded ?? null,
      dead: retention.dead ?? null,
      cancelled: retention.cancelled ?? null,
    };
    return camel(await this.call("PUT", `/v1/queues/${seg(queue)}/retention`, body));
  }

  /**
   * Sends a worker's heartbeat (`Worker` does, every `beatEveryMs`): name,
   * host, pid, queues, concurrency, version, `started_at`, `beat_every_ms`,
   * `running` (`[{id, token, since}]`) and, in its last, `stopped`.
   */
  async putWorker(workerId: string, beat: Obj): Promise<{ id: string; stopped: boolean; secret?: string }> {
    return camel(await this.call("PUT", `/v1/workers/${seg(workerId)}`, beat));
  }

  /**
   * Every worker seen in the last hour, by id: its `state` (`alive`, `gone`:
   * its heartbeats stopped without a word, or `stopped`), what it is, the
   * jobs it runs and, for a gone one, the leases it left `orphaned` until
   * they expire.
   */
  async workers(): Promise<Obj[]> {
    const out: Obj[] = [];
    let after: string | null = null;
    for (;;) {
      const qs: string = after === null ? "" : `?after=${encodeURIComponent(after)}`;
      const page = await this.call("GET", `/v1/workers${qs}`);
      out.push(...camel(page.workers));
      if (page.next === null || page.next === undefined) return out;
      after = page.next;
    }
  }

  /** One pass of the prune over the 5,000 jobs after job `after`. */
  async pruneFrom(after = 0): Promise<Pruned> {
    return camel(await this.call("POST", "/v1/prune", { after }));
  }

  /**
   * Deletes now every finished job past its retention, with its events, a
   * pass at a time (the server also does this by itself); resolves to how
   * many.
   */
  async prune(): Promise<number> {
    let deleted = 0;
    let after = 0;
    for (;;) {
      const p = await this.pruneFrom(after);
      deleted += p.deleted;
      if (p.next === null) return deleted;
      after = p.next;
    }
  }

  /** Every schedule of periodic jobs, by name. */
  async schedules(): Promise<Schedule[]> {
    return camel((await this.call("GET", "/v1/schedules")).schedules);
  }

  /**
   * Adds the schedule `name`, or replaces it (keeping its paused state):
   * each tick enqueues one `job`, whichever process runs the scheduler.
   */
  async putSchedule(name: string, when: When, job: JobTemplate): Promise<Schedule> {
    const template: Obj = { queue: job.queue, kind: job.kind };
    putPayload(template, "payload", job.payload);
    if (job.priority !== undefined) template.priority = job.priority;
    if (job.maxAttempts !== undefined) template.max_attempts = job.maxAttempts;
    if (job.group !== undefined) template.group = job.group;
    const body: Obj = { job: template };
    if (when.cron !== undefined) body.cron = when.cron;
    if (when.tz !== undefined) body.tz = when.tz;
    if (when.everyMs !== undefined) body.every_ms = when.everyMs;
    return camel(await this.call("PUT", `/v1/schedules/${seg(name)}`, body));
  }

  /** Removes the schedule; resolves with true (throws `NotFound` when there is none). */
  async removeSchedule(name: string): Promise<boolean> {
    return (await this.call("DELETE", `/v1/schedules/${seg(name)}`)).deleted;
  }

  /** Pauses the schedule: its ticks enqueue nothing until resumed. */
  /**
   * The schedule `name`: its job, cron or interval, time zone, paused state,
   * and next and latest tick. Throws `NotFound` when no schedule has that name.
   */
  async getSchedule(name: string): Promise<Schedule> {
    return camel(await this.call("GET", `/v1/schedules/${seg(name)}`));
  }

  async pauseSchedule(name: string): Promise<Schedule> {
    return camel(await this.call("POST", `/v1/schedules/${seg(name)}/pause`, {}));
  }

  /** Resumes the schedule from its next tick after now (ticks missed while paused enqueue nothing). */
  async resumeSchedule(name: string): Promise<Schedule> {
    return camel(await this.call("POST", `/v1/schedules/${seg(name)}/resume`, {}));
  }

  /**
   * The server's health (no token needed): `ok`, or `failing` while its
   * store takes no writes; a failing server resolves, it does not throw.
   */
  async health(): Promise<Health> {
    const res = await this.transport.request("GET", "/healthz", undefined, this.timeoutMs, true, {});
    if (res.status === 200 || res.status === 503) {
      try {
        const v = JSON.parse(res.text);
        if (typeof v?.status === "string") return v;
      } catch {
        // not Relay's answer: below
      }
    }
    throw this.refused("GET", "/healthz", res);
  }

  /** The server's metrics, in Prometheus's text format. */
  async metrics(): Promise<string> {
    const res = await this.transport.request("GET", "/metrics", undefined, this.timeoutMs, true, {});
    if (res.status >= 200 && res.status < 300) return res.text;
    throw this.refused("GET", "/metrics", res);
  }
}
