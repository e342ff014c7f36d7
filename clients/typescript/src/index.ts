/**
 * TypeScript client and worker for Relay, the durable job queue, over its
 * HTTP API (`relay serve`). Node 18+, no runtime dependencies.
 *
 * ```ts
 * import { Client, Worker } from "relay-client";
 *
 * const client = new Client("http://127.0.0.1:7433", { token: "secret" });
 * await client.submit({ queue: "emails", kind: "send", payload: { to: "ada@example.com" } });
 *
 * const worker = new Worker(client, ["emails"], { concurrency: 8 });
 * worker.handle("send", async (job) => ({ sent: true }));
 * await worker.run(); // until SIGTERM or SIGINT
 * ```
 */

export { BadAnswer, Client } from "./client.js";
export type {
  BatchOptions,
  DeadGroup,
  Health,
  HeartbeatAnswer,
  HeldLease,
  Job,
  JobFilter,
  JobPage,
  JobTemplate,
  Json,
  Keep,
  LeaseOptions,
  LeaseRequest,
  Progress,
  LeasedJob,
  NewJob,
  Outcome,
  OutcomeAnswer,
  Payload,
  QueueLimits,
  QueueRetention,
  QueuesPage,
  Pruned,
  RateLimit,
  Retention,
  Schedule,
  StatsPage,
  Step,
  Submitted,
  TokenCreated,
  When,
  WorkAnswer,
} from "./client.js";
export * from "./errors.js";
export { ChildFailed, Join, JobContext, Permanent, Retry, Sleep, Snooze, TimedOut, Wait, Worker } from "./worker.js";
export type { Token } from "./worker.js";
export type { Handler, WorkerOptions, WorkerStats } from "./worker.js";
