// The worker on the batch calls (`POST /v1/work`, `POST /v1/heartbeat`)
// against a real `relay serve`: thousands of jobs in few calls, exactly one
// outcome per job, leases lost while handlers run, a server killed with -9
// and restarted under it, a graceful stop.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, NotFound, Permanent, Worker } from "../dist/index.js";
import { startServer, waitFor } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** A client whose `work` and `heartbeat` calls are recorded (what was sent). */
function spiedClient(url, options = {}) {
  const c = new Client(url, { token: server.token, ...options });
  const sent = { work: [], heartbeat: [] };
  for (const name of ["work", "heartbeat"]) {
    const real = c[name]?.bind(c);
    if (real) c[name] = (items, ...rest) => (sent[name].push(items), real(items, ...rest));
  }
  return { client: c, sent };
}

async function submitMany(c, queue, n, job = () => ({})) {
  const ids = [];
  for (let i = 0; i < n; i += 1000) {
    const chunk = Array.from({ length: Math.min(1000, n - i) }, (_, j) => ({ queue, kind: "k", payload: { n: i + j }, ...job(i + j) }));
    ids.push(...(await c.submitBatch(chunk)));
  }
  return ids;
}

/** Runs `fn` on every item, `width` at once. */
async function eachAtOnce(items, width, fn) {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++]);
  }));
}

const count = (events, kind) => events.filter((e) => e.kind === kind).length;

/** Collects what the worker says on stderr while `fn` runs. */
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

test("5,000 no-op jobs at concurrency 64: all SUCCEEDED, one outcome each, in few calls", async (t) => {
  const ids = await submitMany(client, "drain", 5000);
  const { client: c, sent } = spiedClient(server.url);
  const worker = new Worker(c, ["drain"], { concurrency: 64, pollMs: 500, handleSignals: false });
  const runs = new Map();
  t.after(() => worker.stop());
  worker.handle("k", (job) => void runs.set(job.id, (runs.get(job.id) ?? 0) + 1));
  const run = worker.run();
  await waitFor("5,000 jobs", () => worker.stats.succeeded === 5000, 120_000).catch((e) => {
    throw new Error(`${e.message}: ${JSON.stringify(worker.stats)}`);
  });
  worker.stop();
  await run;
  assert.deepEqual(worker.stats, { succeeded: 5000, failed: 0, snoozed: 0, slept: 0, released: 0, lost: 0 });
  assert.equal((await client.stats()).drain.SUCCEEDED, 5000);
  assert.equal(runs.size, 5000);
  assert.ok([...runs.values()].every((n) => n === 1), "each handler ran once");
  // Outcomes that finish together travel together, with the next lease.
  const reported = sent.work.reduce((n, outcomes) => n + outcomes.length, 0);
  assert.equal(reported, 5000, "every outcome sent once");
  assert.ok(sent.work.length <= 5000 / 16, `${sent.work.length} work calls for 5,000 jobs`);
  await eachAtOnce(ids, 8, async (id) => {
    const events = await client.events(id);
    assert.equal(count(events, "succeeded"), 1, `job ${id}: ${events.map((e) => e.kind)}`);
  });
});

test("leases lost while handlers run: exactly those outcomes dropped, the others succeed", async (t) => {
  const ids = await submitMany(client, "beat", 8);
  const [cancelled, alsoCancelled, deleted] = ids;
  const { client: c, sent } = spiedClient(server.url);
  // Handlers outlive their 1.5 s leases: only the heartbeat keeps them.
  const worker = new Worker(c, ["beat"], { concurrency: 8, leaseForMs: 1500, pollMs: 300, handleSignals: false });
  let open;
  const gate = new Promise((r) => (open = r));
  t.after(() => (open(), worker.stop()));
  const started = new Set();
  worker.handle("k", async (job) => {
    started.add(job.id);
    await gate;
    return { ok: true };
  });
  const run = worker.run();
  await waitFor("every handler to start", () => started.size === 8);
  await client.cancel(cancelled);
  await client.cancel(alsoCancelled);
  await client.cancel(deleted);
  await client.delete(deleted);
  await sleep(2500); // several beats (every 500 ms), past the 1.5 s leases
  open();
  await waitFor("the outcomes", () => worker.stats.succeeded + worker.stats.lost === 8);
  worker.stop();
  await run;
  assert.deepEqual(worker.stats, { succeeded: 5, failed: 0, snoozed: 0, slept: 0, released: 0, lost: 3 });
  const reportedIds = sent.work.flat().map((o) => o.id);
  for (const id of [cancelled, alsoCancelled, deleted]) assert.ok(!reportedIds.includes(id), `job ${id}'s outcome was dropped, not sent`);
  // One call per beat for every running lease, not one per job.
  assert.ok(sent.heartbeat.length >= 3, `${sent.heartbeat.length} heartbeat calls`);
  assert.equal(sent.heartbeat[0].length, 8, "the first beat extends all 8 leases in one call");
  assert.ok(sent.heartbeat.at(-1).length === 5, "later beats only the 5 still held");
  assert.equal((await client.get(cancelled)).state, "CANCELLED");
  await assert.rejects(client.get(deleted), NotFound);
  for (const id of ids.slice(3)) {
    assert.deepEqual((await client.events(id)).map((e) => e.kind), ["submitted", "leased", "succeeded"], `job ${id} never lost its lease`);
  }
});

test("kill -9 of the server mid-run: the worker goes on, every job ends as its handler said", async (t) => {
  const own = await startServer();
  try {
    const ids = await submitMany(new Client(own.url, { token: own.token }), "crash", 2000);
    const c = new Client(own.url, { token: own.token, timeoutMs: 5000 });
    // Leases outlast the outage (heartbeats stop with the server): the
    // outcomes sent again find them still held.
    const worker = new Worker(c, ["crash"], { concurrency: 32, leaseForMs: 10_000, pollMs: 500, handleSignals: false });
    t.after(() => worker.stop());
    const runs = new Map();
    worker.handle("k", async (job) => {
      runs.set(job.id, (runs.get(job.id) ?? 0) + 1);
      await sleep(1);
      if (job.payload.n % 7 === 0) throw new Permanent("every 7th job fails for good");
      return { n: job.payload.n };
    });
    const said = await stderrOf(async () => {
      const run = worker.run();
      await waitFor("a third of the jobs", () => worker.stats.succeeded + worker.stats.failed >= 600);
      await own.kill();
      await sleep(100); // answers already on their way are read
      const done = worker.stats.succeeded + worker.stats.failed;
      await sleep(1000);
      assert.equal(worker.stats.succeeded + worker.stats.failed, done, "nothing counted done while the server is down");
      await own.restart();
      await waitFor("every job to end", async () => {
        const s = (await c.stats()).crash ?? {};
        return (s.SUCCEEDED ?? 0) + (s.DEAD ?? 0) === 2000;
      }, 90_000);
      await waitFor("the worker's last answers", () => worker.stats.succeeded === 1714);
      worker.stop();
      await run;
    });
    assert.equal(said.split("cannot lease").length - 1, 1, `the outage said once: ${said}`);
    assert.equal(said.split("answers again").length - 1, 1, `the recovery said once: ${said}`);
    const jobs = new Map();
    await eachAtOnce(ids, 8, async (id) => jobs.set(id, await Promise.all([c.get(id), c.events(id)])));
    const kinds = (id) => jobs.get(id)[1].map((e) => e.kind).join(", ");
    // One job's events, to see the kinds: one the kill touched if any.
    const shown = ids.find((id) => count(jobs.get(id)[1], "leased") > 1) ?? ids[1];
    console.log(`worker ${JSON.stringify(worker.stats)}; job ${shown} (handler ran ${runs.get(shown)} time(s)): ${kinds(shown)}`);
    assert.equal(worker.stats.succeeded, 1714, "each success counted once, resent or not");
    assert.ok(worker.stats.failed <= 286 && worker.stats.failed + worker.stats.lost >= 286, JSON.stringify(worker.stats));
    // Outcomes finished while the server was down were kept and sent again,
    // not dropped to be run again after their leases expired. (A job leased
    // by a call whose answer the kill lost runs once, after its lease expires.)
    const twice = ids.filter((id) => runs.get(id) !== 1);
    assert.deepEqual(twice.map((id) => `${id}: ${kinds(id)}`), [], "every handler ran exactly once");
    ids.forEach((id, n) => {
      const [job, events] = jobs.get(id);
      if (n % 7 === 0) {
        assert.equal(job.state, "DEAD", `job ${id}`);
        assert.match(job.lastError, /every 7th job fails for good/);
        assert.equal(count(events, "failed"), 1, `job ${id}: ${kinds(id)}`);
      } else {
        assert.equal(job.state, "SUCCEEDED", `job ${id}`);
        assert.deepEqual(job.result, { n });
      }
      assert.equal(count(events, "succeeded"), n % 7 === 0 ? 0 : 1, `job ${id}: ${kinds(id)}`);
    });
  } finally {
    await own.stop();
  }
});

test("an outcome is not held back behind a long-poll in flight", async (t) => {
  const { client: c } = spiedClient(server.url);
  const worker = new Worker(c, ["lone"], { concurrency: 4, pollMs: 2000, handleSignals: false });
  t.after(() => worker.stop());
  let ended = 0;
  worker.handle("k", async () => {
    await sleep(300);
    ended = Date.now();
  });
  const run = worker.run();
  await sleep(200); // the worker is long-polling an empty queue
  await client.submit({ queue: "lone", kind: "k" });
  await waitFor("the job", () => worker.stats.succeeded === 1);
  const late = Date.now() - ended;
  worker.stop();
  await run;
  assert.ok(late < 1000, `reported ${late} ms after its handler ended (the long-poll waits 2 s)`);
});

test("stop: finished handlers reported, the ones still running released in one call", async (t) => {
  const ids = await submitMany(client, "grace", 4);
  const { client: c, sent } = spiedClient(server.url);
  const worker = new Worker(c, ["grace"], { concurrency: 4, graceMs: 800, pollMs: 300, handleSignals: false });
  t.after(() => worker.stop());
  const started = new Set();
  worker.handle("k", (job) => {
    started.add(job.id);
    return job.payload.n < 2 ? sleep(200) : new Promise(() => {});
  });
  const run = worker.run();
  await waitFor("every handler to start", () => started.size === 4);
  worker.stop();
  assert.deepEqual(await run, { succeeded: 2, failed: 0, snoozed: 0, slept: 0, released: 2, lost: 0 });
  const releases = sent.work.filter((outcomes) => outcomes.some((o) => o.outcome === "release"));
  assert.deepEqual(releases.map((outcomes) => outcomes.map((o) => [o.id, o.outcome])), [[[ids[2], "release"], [ids[3], "release"]]]);
  assert.deepEqual((await c.get(ids[0])).state, "SUCCEEDED");
  for (const id of ids.slice(2)) {
    const job = await c.get(id);
    assert.deepEqual([job.state, job.attempts], ["READY", 0]);
  }
});

test("a result that cannot be sent as JSON fails its own job, not its batch", async (t) => {
  const ids = await submitMany(client, "bigint", 20);
  const worker = new Worker(client, ["bigint"], { concurrency: 20, pollMs: 300, handleSignals: false });
  t.after(() => worker.stop());
  worker.handle("k", (job) => (job.payload.n === 7 ? { n: 7n } : { n: job.payload.n }));
  const run = worker.run();
  await waitFor("every outcome", () => worker.stats.succeeded + worker.stats.failed === 20);
  worker.stop();
  await run;
  assert.deepEqual([worker.stats.succeeded, worker.stats.failed], [19, 1]);
  const bad = await client.get(ids[7]);
  assert.deepEqual([bad.state, bad.attempts], ["DEAD", 1]);
  assert.match(bad.lastError, /cannot be sent as JSON: .*BigInt/);
  assert.deepEqual((await client.get(ids[8])).result, { n: 8 });
});
