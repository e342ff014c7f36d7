/**
 * A client of Relay's HTTP API (`relay serve`), on Node 18+'s `fetch`.
 *
 * Payloads and results are bytes on the server, JSON by convention. A JSON
 * value given here comes back as that value; a `Uint8Array` travels as
 * base64 and comes back as a `Uint8Array`; `undefined`/`null` is none.
 */

import { RelayError, Unavailable, errorFor } from "./errors.js";

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
  payload: Payload;
  result: Payload;
  raw: Record<string, unknown>;
}

export interface LeaseOptions {
  max?: number;
  leaseForMs?: number;
  waitMs?: number;
  worker?: string;
}

type Obj = Record<string, any>;

function putPayload(body: Obj, name: string, value: Payload): void {
  if (value === undefined || value === null) return;
  if (value instanceof Uint8Array) {
    body[`${name}_base64`] = Buffer.from(value).toString("base64");
  } else {
    body[name] = value;
  }
}

function getPayload(obj: Obj, name: string): Payload {
  const b = obj[`${name}_base64`];
  if (typeof b === "string") return new Uint8Array(Buffer.from(b, "base64"));
  return obj[name] ?? null;
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
    ["lease_for_ms", j.leaseForMs],
    ["timeout_ms", j.timeoutMs],
    ["depends_on", j.dependsOn?.length ? j.dependsOn : undefined],
    ["on_dependency_failure", j.onDependencyFailure],
    ["traceparent", j.traceparent],
    ["tags", j.tags?.length ? j.tags : undefined],
  ];
  for (const [k, v] of optional) if (v !== undefined) body[k] = v;
  return body;
}

function leased(v: Obj): LeasedJob {
  return {
    id: v.id,
    token: v.token,
    queue: v.queue,
    kind: v.kind,
    priority: v.priority,
    attempt: v.attempt,
    maxAttempts: v.max_attempts,
    leaseExpiresAt: v.lease_expires_at,
    leaseForMs: v.lease_for_ms ?? 30_000,
    timeoutMs: v.timeout_ms ?? null,
    payload: getPayload(v, "payload"),
    traceparent: v.traceparent ?? null,
  };
}

function job(v: Obj): Job {
  return {
    id: v.id,
    queue: v.queue,
    kind: v.kind,
    state: v.state,
    priority: v.priority,
    attempts: v.attempts,
    maxAttempts: v.max_attempts,
    lastError: v.last_error ?? null,
    waitingOn: v.waiting_on ?? 0,
    traceparent: v.traceparent ?? null,
    tags: v.tags ?? [],
    payload: getPayload(v, "payload"),
    result: getPayload(v, "result"),
    raw: v,
  };
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

  constructor(url: string, options: { token?: string; timeoutMs?: number } = {}) {
    this.url = url.replace(/\/+$/, "");
    this.token = options.token;
    this.timeoutMs = options.timeoutMs ?? 30_000;
  }

  private async call(method: string, path: string, body?: Obj, timeoutMs?: number): Promise<any> {
    const headers: Record<string, string> = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs ?? this.timeoutMs),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string } }).cause?.code ?? (e as Error).message;
      throw new Unavailable(`cannot reach Relay at ${this.url} (${cause}); is \`relay serve\` running there?`, "unreachable");
    }
    const text = await res.text();
    if (res.ok) return text ? JSON.parse(text) : null;
    let err: Obj | undefined;
    try {
      err = JSON.parse(text).error;
    } catch {
      err = undefined;
    }
    if (err && typeof err.code === "string") throw errorFor(res.status, err.code, String(err.message));
    throw new RelayError(`${method} ${path}: HTTP ${res.status} without a Relay error body: ${text.slice(0, 200)}`, "error", res.status);
  }

  /** Submits one job; returns its id. Durable when it resolves. */
  async submit(job: NewJob): Promise<number> {
    return (await this.call("POST", "/v1/jobs", jobBody(job))).id;
  }

  /** Submits 1-10,000 jobs in one call, all or none; returns their ids. */
  async submitBatch(jobs: NewJob[]): Promise<number[]> {
    return (await this.call("POST", "/v1/jobs/batch", { jobs: jobs.map(jobBody) })).ids;
  }

  /** Leases up to `max` jobs, waiting up to `waitMs` for one (a long-poll). */
  async lease(queues: string[], options: LeaseOptions = {}): Promise<LeasedJob[]> {
    const waitMs = options.waitMs ?? 0;
    const body: Obj = {
      queues,
      max: options.max ?? 1,
      lease_for_ms: options.leaseForMs ?? 30_000,
      wait_ms: waitMs,
    };
    if (options.worker !== undefined) body.worker = options.worker;
    const v = await this.call("POST", "/v1/lease", body, this.timeoutMs + waitMs);
    return (v.jobs as Obj[]).map(leased);
  }

  /** Reports success (repeating it with the same token is answered Ok). */
  async ack(id: number, token: number, result?: Payload): Promise<void> {
    const body: Obj = { token };
    putPayload(body, "result", result);
    await this.call("POST", `/v1/jobs/${id}/ack`, body);
  }

  /** Reports failure: READY again after `retryInMs` (or the back-off), DEAD when spent or `permanent`. */
  async nack(id: number, token: number, error: string, options: { retryInMs?: number; permanent?: boolean } = {}): Promise<void> {
    const body: Obj = { token, error, permanent: options.permanent ?? false };
    if (options.retryInMs !== undefined) body.retry_in_ms = options.retryInMs;
    await this.call("POST", `/v1/jobs/${id}/nack`, body);
  }

  /** Extends the lease to `leaseForMs` from now; returns the new expiry. */
  async extend(id: number, token: number, leaseForMs = 30_000): Promise<string> {
    return (await this.call("POST", `/v1/jobs/${id}/extend`, { token, lease_for_ms: leaseForMs })).lease_expires_at;
  }

  /** Gives the job back untried; with `inMs`, READY again only after that (a snooze). */
  async release(id: number, token: number, inMs?: number): Promise<void> {
    const body: Obj = { token };
    if (inMs !== undefined) body.in_ms = inMs;
    await this.call("POST", `/v1/jobs/${id}/release`, body);
  }

  async cancel(id: number): Promise<void> {
    await this.call("POST", `/v1/jobs/${id}/cancel`, {});
  }

  async retry(id: number): Promise<void> {
    await this.call("POST", `/v1/jobs/${id}/retry`, {});
  }

  async delete(id: number): Promise<void> {
    await this.call("DELETE", `/v1/jobs/${id}`);
  }

  async get(id: number): Promise<Job> {
    return job(await this.call("GET", `/v1/jobs/${id}`));
  }

  /** The job's event log, oldest first. */
  async events(id: number): Promise<Obj[]> {
    return (await this.call("GET", `/v1/jobs/${id}/events`)).events;
  }

  /** Appends an event of your own to the job's log; returns its number. */
  async appendEvent(id: number, kind: string, data: Json = {}): Promise<number> {
    return (await this.call("POST", `/v1/jobs/${id}/events`, { kind, data })).seq;
  }

  /** Counts of every queue's jobs by state, and its settings. */
  async stats(): Promise<Record<string, Obj>> {
    return (await this.call("GET", "/v1/stats")).queues;
  }

  /** The newest jobs, filtered by queue and state. */
  async jobs(filter: { queue?: string; state?: string; limit?: number } = {}): Promise<Job[]> {
    const q = new URLSearchParams();
    if (filter.queue) q.set("queue", filter.queue);
    if (filter.state) q.set("state", filter.state);
    q.set("limit", String(filter.limit ?? 100));
    return ((await this.call("GET", `/v1/jobs?${q}`)).jobs as Obj[]).map(job);
  }
}
