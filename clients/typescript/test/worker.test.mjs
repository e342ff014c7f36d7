// The worker against a real `relay serve`: handlers by kind, failures with
// their stack, heartbeats, graceful SIGTERM, a server that comes back.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, test } from "node:test";
import { Client, Permanent, Snooze, Worker } from "../dist/index.js";
import { freePort, startServer, waitFor } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

test("handlers by kind, up to the concurrency at once", async () => {
  const ok = [];
  for (let i = 0; i < 30; i++) ok.push(await client.submit({ queue: "w", kind: "ok", payload: { n: i } }));
  const boom = await client.submit({ queue: "w", kind: "boom", maxAttempts: 1 });
  const doomed = await client.submit({ queue: "w", kind: "permanent", maxAttempts: 5 });
  const later = await client.submit({ queue: "w", kind: "snooze" });
  const unknown = await client.submit({ queue: "w", kind: "nobody" });
  const worker = new Worker(client, ["w"], { concurrency: 8, pollMs: 500, handleSignals: false });
  let now = 0, most = 0;
  worker
    .handle("ok", async (job) => {
      most = Math.max(most, ++now);
      await new Promise((r) => setTimeout(r, 20));
      now--;
      return { double: job.payload.n * 2 };
    })
    .handle("boom", () => { throw new TypeError("the payload was wrong"); })
    .handle("permanent", () => { throw new Permanent("this can never work"); })
    .handle("snooze", () => { throw new Snooze(3_600_000); });
  const run = worker.run();
  await waitFor("every job", () => worker.stats.succeeded === 30 && worker.stats.failed === 3 && worker.stats.snoozed === 1).catch((e) => { throw new Error(`${e.message}: ${JSON.stringify(worker.stats)}`); });
  worker.stop();
  await run;
  for (let i = 0; i < ok.length; i++) assert.deepEqual((await client.get(ok[i])).result, { double: i * 2 });
  assert.ok(most > 1 && most <= 8, `ran ${most} at once`);
  const dead = await client.get(boom);
  assert.equal(dead.state, "DEAD");
  assert.match(dead.lastError, /TypeError: the payload was wrong/);
  assert.match(dead.lastError, /at .*worker\.test\.mjs/, "the stack is in the error");
  assert.equal((await client.get(doomed)).attempts, 1);
  assert.match((await client.get(unknown)).lastError, /no handler for kind 'nobody'/);
  const s = await client.get(later);
  assert.deepEqual([s.state, s.attempts], ["SCHEDULED", 0]);
});

test("heartbeats keep a long job leased", async () => {
  const id = await client.submit({ queue: "slow", kind: "slow" });
  const worker = new Worker(client, ["slow"], { concurrency: 1, leaseForMs: 1200, pollMs: 300, handleSignals: false });
  worker.handle("slow", () => new Promise((r) => setTimeout(r, 3500)));
  const run = worker.run();
  await waitFor("the slow job", () => worker.stats.succeeded === 1);
  worker.stop();
  await run;
  assert.deepEqual((await client.events(id)).map((e) => e.kind), ["submitted", "leased", "succeeded"]);
});

test("SIGTERM releases running jobs and exits", async () => {
  const id = await client.submit({ queue: "term", kind: "forever" });
  const script = `
    import { Client, Worker } from ${JSON.stringify(new URL("../dist/index.js", import.meta.url).href)};
    const w = new Worker(new Client(process.argv[1], { token: process.argv[2] }), ["term"], { graceMs: 300, pollMs: 300 });
    w.handle("forever", (job) => { console.log("RUNNING", job.id); return new Promise(() => {}); });
    const s = await w.run();
    console.log("STOPPED released", s.released);
    process.exit(0);
  `;
  const proc = spawn(process.execPath, ["--input-type=module", "-e", script, server.url, server.token], { stdio: ["ignore", "pipe", "inherit"] });
  let out = "";
  proc.stdout.on("data", (d) => (out += d));
  await waitFor("the job to run", () => out.includes(`RUNNING ${id}`));
  const exited = new Promise((ok) => proc.once("exit", ok));
  proc.kill("SIGTERM");
  assert.equal(await exited, 0);
  assert.match(out, /STOPPED released 1/);
  const job = await client.get(id);
  assert.deepEqual([job.state, job.attempts], ["READY", 0]);
});

test("a server that goes away and comes back", async () => {
  const port = await freePort();
  const away = new Client(`http://127.0.0.1:${port}`, { token: server.token, timeoutMs: 2000 });
  const worker = new Worker(away, ["back"], { pollMs: 300, handleSignals: false });
  const done = [];
  worker.handle("k", (job) => { done.push(job.id); });
  const errors = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => { errors.push(String(chunk)); return write(chunk, ...rest); };
  try {
    const run = worker.run();
    await new Promise((r) => setTimeout(r, 1500));
    const late = await startServer(port);
    try {
      const id = await away.submit({ queue: "back", kind: "k" });
      await waitFor("the job after the server came up", () => done.includes(id), 60_000);
      worker.stop();
      await run;
    } finally {
      await late.stop();
    }
  } finally {
    process.stderr.write = write;
  }
  const text = errors.join("");
  assert.equal(text.split("cannot lease").length - 1, 1, `said once per outage: ${text}`);
  assert.match(text, /answers again/);
});

test("the trace context reaches the handler", async () => {
  const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
  const traced = await client.submit({ queue: "trace", kind: "k", traceparent: tp });
  const plain = await client.submit({ queue: "trace", kind: "k" });
  assert.equal((await client.get(traced)).traceparent, tp);
  assert.equal((await client.get(plain)).traceparent, null);
  const seen = new Map();
  const worker = new Worker(client, ["trace"], { concurrency: 2, pollMs: 500, handleSignals: false });
  worker.handle("k", (job) => { seen.set(job.id, job.traceparent); });
  const run = worker.run();
  await waitFor("both jobs", () => seen.size === 2);
  worker.stop();
  await run;
  assert.deepEqual(Object.fromEntries(seen), { [traced]: tp, [plain]: null });
});

test("the worker says it is alive, what it runs, and that it stopped", async () => {
  const ids = [await client.submit({ queue: "presence", kind: "slow" }), await client.submit({ queue: "presence", kind: "slow" })];
  let release;
  const released = new Promise((r) => (release = r));
  const worker = new Worker(client, ["presence"], { concurrency: 2, handleSignals: false, pollMs: 500, beatEveryMs: 200, name: "ts worker" });
  worker.handle("slow", () => released);
  const done = worker.run();
  const mine = async () => (await client.workers()).find((w) => w.id === worker.id);
  await waitFor("the worker to say it runs both jobs", async () => (await mine())?.running.length === 2);
  const w = await mine();
  assert.match(worker.id, /^ts_worker-[0-9a-f]{8}$/);
  assert.deepEqual([w.state, w.name, w.pid, w.queues, w.concurrency], ["alive", "ts worker", process.pid, ["presence"], 2]);
  assert.match(w.version, /^relay-typescript /);
  assert.deepEqual(w.running.map((r) => r.id).sort((a, b) => a - b), ids.sort((a, b) => a - b));
  assert.deepEqual(w.orphaned, []);
  // Its leases name its id (only its record can show them orphaned).
  for (const id of ids) assert.equal((await client.get(id)).raw.leased_by, worker.id);
  release();
  await waitFor("both jobs to succeed", async () => worker.stats.succeeded === 2);
  worker.stop();
  await done;
  const stopped = await mine();
  assert.deepEqual([stopped.state, stopped.running], ["stopped", []]);
  assert.ok(stopped.stoppedAt);
});
