// Review fixes of the worker: no outcome or lease request blocks the others,
// unreported outcomes keep their leases, wrong-length answers, outcomes the
// server refuses, a token refused, a server with a short --max-wait.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { BadAnswer, Busy, Client, Forbidden, RelayError, Retry, Snooze, Timeout, Unauthorized, Worker, errorFor } from "../dist/index.js";
import { startServer, waitFor } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function stderrOf(fn) {
  const lines = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => (lines.push(String(chunk)), write(chunk, ...rest));
  try {
    await fn();
  } finally {
    process.stderr.write = write;
  }
  return lines.join("");
}

async function runUntil(worker, what, predicate, timeoutMs = 20_000) {
  const run = worker.run();
  try {
    await waitFor(what, predicate, timeoutMs);
  } catch (e) {
    throw new Error(`${e.message}: ${JSON.stringify(worker.stats)}`);
  } finally {
    worker.stop();
  }
  return run;
}

test("a batch refused whole: each outcome alone, the bad one a permanent nack, the others applied", async (t) => {
  const ids = await client.submitBatch(Array.from({ length: 6 }, (_, n) => ({ queue: "refused", kind: "k", payload: { n } })));
  const c = new Client(server.url, { token: server.token });
  const real = c.work.bind(c);
  // Job 2's nack carries a field the server refuses: the whole call is refused.
  c.work = (outcomes, lease) => real(outcomes.map((o) => (o.id === ids[2] && o.outcome === "nack" && !o.permanent ? { ...o, retryInMs: -5 } : o)), lease);
  const worker = new Worker(c, ["refused"], { concurrency: 6, pollMs: 300, handleSignals: false });
  t.after(() => worker.stop());
  let open;
  const gate = new Promise((r) => (open = r));
  worker.handle("k", async (job) => {
    await gate; // all six finish together: one batch
    if (job.payload.n === 2) throw new Error("job 2 fails");
    return { n: job.payload.n };
  });
  setTimeout(() => open(), 500);
  await runUntil(worker, "every outcome", () => worker.stats.succeeded + worker.stats.failed === 6);
  assert.deepEqual([worker.stats.succeeded, worker.stats.failed], [5, 1]);
  const bad = await client.get(ids[2]);
  assert.deepEqual([bad.state, bad.attempts], ["DEAD", 1]);
  assert.match(bad.lastError, /refused this job's nack: .*retry_in_ms/);
  assert.deepEqual((await client.get(ids[3])).result, { n: 3 });
});

test("delays: Retry/Snooze refuse bad ones; fractions, huge delays and a concurrency over 1000 are made valid", async (t) => {
  for (const bad of [NaN, -1, Infinity]) {
    assert.throws(() => new Retry("x", bad), RangeError);
    assert.throws(() => new Snooze(bad), RangeError);
  }
  const [frac, huge, snooze] = await client.submitBatch([0, 1, 2].map((n) => ({ queue: "delays", kind: "k", payload: { n } })));
  const worker = new Worker(client, ["delays"], { concurrency: 1500, pollMs: 300, leaseForMs: 2000.5, handleSignals: false });
  t.after(() => worker.stop());
  worker.handle("k", (job) => {
    if (job.payload.n === 0) throw new Retry("fraction", 3_600_000.7);
    if (job.payload.n === 1) throw new Retry("huge", Number.MAX_SAFE_INTEGER);
    throw new Snooze(1e300);
  });
  await runUntil(worker, "every outcome", () => worker.stats.failed === 2 && worker.stats.snoozed === 1);
  const states = await Promise.all([frac, huge, snooze].map(async (id) => (await client.get(id)).state));
  assert.deepEqual(states, ["RETRYING", "RETRYING", "SCHEDULED"]);
});

test("outcomes waiting to be reported keep their leases (the heartbeat covers them)", async (t) => {
  const id = await client.submit({ queue: "unreported", kind: "k" });
  const c = new Client(server.url, { token: server.token });
  const real = c.work.bind(c);
  let blocked = true;
  const beats = [];
  c.work = (outcomes, lease) => (blocked && outcomes.length ? Promise.reject(errorFor(503, "busy", "the store is busy")) : real(outcomes, lease));
  const realBeat = c.heartbeat.bind(c);
  c.heartbeat = (leases, ...rest) => (beats.push(leases.map((l) => l.id)), realBeat(leases, ...rest));
  const worker = new Worker(c, ["unreported"], { concurrency: 1, leaseForMs: 1000, pollMs: 200, handleSignals: false });
  t.after(() => worker.stop());
  worker.handle("k", () => ({ ok: true }));
  setTimeout(() => (blocked = false), 3500); // past several 1 s leases
  await stderrOf(() => runUntil(worker, "the outcome", () => worker.stats.succeeded + worker.stats.lost === 1));
  assert.deepEqual(worker.stats, { succeeded: 1, failed: 0, snoozed: 0, slept: 0, released: 0, lost: 0 });
  assert.ok(beats.some((ids) => ids.includes(id)), `the heartbeat covered the unreported outcome: ${JSON.stringify(beats)}`);
  assert.deepEqual((await client.events(id)).map((e) => e.kind), ["submitted", "leased", "succeeded"]);
});

/** A client whose transport answers `answer(method, path, body)` (no server). */
function fakeClient(answer) {
  const c = new Client("http://127.0.0.1:1");
  c.transport.request = async (method, path, text) => {
    const body = text && JSON.parse(text);
    // The worker's own heartbeats (PUT /v1/workers/{id}) answered as a server does.
    const v = path.startsWith("/v1/workers/") ? { id: decodeURIComponent(path.split("/").pop()), stopped: body.stopped } : answer(method, path, body);
    return { status: 200, text: JSON.stringify(v) };
  };
  return c;
}

const leasedJob = (id) => ({ id, token: 1, queue: "q", kind: "k", priority: 0, attempt: 1, max_attempts: 3, lease_expires_at: "", lease_for_ms: 30_000, payload: null });

test("answers of the wrong length throw RelayError; the worker runs every job it received", async () => {
  const short = fakeClient(() => ({ outcomes: [], jobs: [leasedJob(9)] }));
  await assert.rejects(short.work([{ id: 1, token: 1, outcome: "ack" }]), (e) => e instanceof BadAnswer && e instanceof RelayError && e.jobs[0].id === 9);
  const long = fakeClient(() => ({ leases: [{ id: 1, lease_expires_at: "" }, { id: 2, error: { code: "lease_lost", message: "x" } }] }));
  await assert.rejects(long.heartbeat([{ id: 1, token: 1 }]), RelayError);

  // Job 1 leased; its report is answered short, with job 2 leased; then right.
  let calls = 0;
  const c = fakeClient((method, path, body) => {
    if (path === "/v1/heartbeat") return { leases: [...body.leases, { id: 99, error: { code: "lease_lost", message: "x" } }] };
    calls++;
    if (calls === 1) return { outcomes: [], jobs: [leasedJob(1)] };
    if (calls === 2) return { outcomes: [], jobs: [leasedJob(2)] };
    return { outcomes: body.outcomes.map((o) => ({ id: o.id, state: "SUCCEEDED" })), jobs: [] };
  });
  const worker = new Worker(c, ["q"], { concurrency: 2, leaseForMs: 300, pollMs: 50, handleSignals: false });
  const ran = [];
  worker.handle("k", async (job) => {
    ran.push(job.id);
    await sleep(job.id === 2 ? 400 : 0); // the heartbeat runs meanwhile (a long answer)
  });
  await stderrOf(() => runUntil(worker, "both jobs", () => ran.length === 2 && worker.stats.succeeded === 2, 10_000));
  assert.deepEqual(ran, [1, 2]);
});

test("an outcome refused for good (a result over the size limit) fails its job, saying why", async (t) => {
  const [big, fine] = await client.submitBatch([0, 1].map((n) => ({ queue: "toobig", kind: "k", payload: { n } })));
  const worker = new Worker(client, ["toobig"], { concurrency: 2, pollMs: 300, handleSignals: false });
  t.after(() => worker.stop());
  worker.handle("k", (job) => (job.payload.n === 0 ? { blob: "x".repeat(1_500_000) } : { n: 1 }));
  const said = await stderrOf(() => runUntil(worker, "both outcomes", () => worker.stats.succeeded + worker.stats.failed === 2));
  assert.deepEqual([worker.stats.succeeded, worker.stats.failed], [1, 1]);
  const job = await client.get(big);
  assert.deepEqual([job.state, job.attempts], ["DEAD", 1]);
  assert.match(job.lastError, /refused this job's ack/);
  assert.match(said, /failing it for good/);
  assert.equal((await client.get(fine)).state, "SUCCEEDED");
});

test("errors: Forbidden and Timeout; a refused token makes run() reject", async () => {
  assert.ok(errorFor(403, "forbidden", "no") instanceof Forbidden);
  assert.ok(errorFor(504, "timeout", "late") instanceof Timeout);
  const worker = new Worker(new Client(server.url, { token: "wrong" }), ["q"], { pollMs: 300, handleSignals: false });
  const said = await stderrOf(async () => {
    const outcome = await Promise.race([worker.run().then(() => "resolved", (e) => e), sleep(5000).then(() => "still running")]);
    worker.stop();
    assert.ok(outcome instanceof Unauthorized, String(outcome));
  });
  assert.match(said, /refuses this worker/);
});

test("a server whose --max-wait is below pollMs: the long-poll lowered to 1 s, once", async () => {
  const short = await startServer(undefined, { maxWait: "2s" });
  try {
    const c = new Client(short.url, { token: short.token });
    const id = await c.submit({ queue: "maxwait", kind: "k" });
    const worker = new Worker(c, ["maxwait"], { handleSignals: false }); // pollMs 5 s
    worker.handle("k", () => {});
    const said = await stderrOf(() => runUntil(worker, "the job", () => worker.stats.succeeded === 1, 10_000));
    assert.equal(said.split("polling every 1000 ms").length - 1, 1, said);
    assert.equal((await c.get(id)).state, "SUCCEEDED");
  } finally {
    await short.stop();
  }
});
