// The client against a real `relay serve`: every call, payloads in the form
// they were given, and every error as the class named after its code.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, DependencyNotFound, InvalidInput, InvalidRequest, InvalidState, LeaseLost, NotFound, PayloadTooLarge, RelayError, Unauthorized, Unavailable } from "../dist/index.js";
import { freePort, startServer } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

test("submit, lease, ack; payloads and results round-trip", async () => {
  const payloads = [{ to: "ada", n: [1, 2.5] }, "text", 7, new Uint8Array([255, 0, 1]), null];
  const ids = [];
  for (const p of payloads) ids.push(await client.submit({ queue: "rt", kind: "k", payload: p }));
  for (let i = 0; i < ids.length; i++) assert.deepEqual((await client.get(ids[i])).payload, payloads[i]);
  const jobs = await client.lease(["rt"], { max: 10 });
  assert.deepEqual(jobs.map((j) => j.id), ids);
  assert.deepEqual(jobs.map((j) => j.payload), payloads);
  await client.ack(ids[0], jobs[0].token, { sent: true });
  await client.ack(ids[1], jobs[1].token, new Uint8Array([0, 1]));
  await client.ack(ids[0], jobs[0].token, { sent: true }); // repeated: Ok
  const got = await client.get(ids[0]);
  assert.equal(got.state, "SUCCEEDED");
  assert.deepEqual(got.result, { sent: true });
  assert.deepEqual((await client.get(ids[1])).result, new Uint8Array([0, 1]));
  assert.deepEqual((await client.events(ids[0])).map((e) => e.kind), ["submitted", "leased", "succeeded"]);
});

test("batch, nack, extend, release, cancel, retry, delete, stats, dependencies", async () => {
  const [a, b, c] = await client.submitBatch([0, 1, 2].map((i) => ({ queue: "ops", kind: "k", payload: { i }, maxAttempts: 2 })));
  const held = new Map((await client.lease(["ops"], { max: 3, leaseForMs: 10_000 })).map((j) => [j.id, j]));
  assert.match(await client.extend(a, held.get(a).token, 60_000), /Z$/);
  await client.nack(a, held.get(a).token, "smtp down", { retryInMs: 0 });
  assert.equal((await client.get(a)).lastError, "smtp down");
  await client.release(b, held.get(b).token);
  await client.release(c, held.get(c).token, 600_000);
  await client.cancel(c);
  await client.retry(c);
  assert.ok((await client.appendEvent(c, "note", { by: "ops" })) >= 1);
  assert.equal((await client.stats()).ops.READY, 3);
  await client.delete(c);
  await assert.rejects(client.get(c), NotFound);
  assert.deepEqual((await client.jobs({ queue: "ops", state: "READY" })).map((j) => j.id), [b, a]);
  const parent = await client.submit({ queue: "deps", kind: "p" });
  const child = await client.submit({ queue: "deps", kind: "c", dependsOn: [parent] });
  assert.equal((await client.get(child)).state, "WAITING");
  await assert.rejects(client.submit({ queue: "deps", kind: "c", dependsOn: [999999] }), DependencyNotFound);
});

test("jobs waiting for their time are SCHEDULED or RETRYING, apart from READY", async () => {
  const later = await client.submit({ queue: "sched", kind: "k", delayMs: 3_600_000 });
  const flaky = await client.submit({ queue: "sched", kind: "k", maxAttempts: 3 });
  const [job] = await client.lease(["sched"]);
  assert.equal(job.id, flaky, "the scheduled job is not leased before its time");
  await client.nack(flaky, job.token, "upstream 503", { retryInMs: 600_000 });
  assert.equal((await client.get(later)).state, "SCHEDULED");
  assert.equal((await client.get(flaky)).state, "RETRYING");
  const counts = (await client.stats()).sched;
  assert.deepEqual([counts.READY ?? 0, counts.SCHEDULED, counts.RETRYING], [0, 1, 1]);
  assert.deepEqual((await client.jobs({ queue: "sched", state: "RETRYING" })).map((j) => j.id), [flaky]);
  assert.deepEqual(await client.lease(["sched"]), []);
});

test("every error names its cause", async () => {
  await assert.rejects(new Client(server.url, { token: "wrong" }).stats(), (e) => e instanceof Unauthorized && e.status === 401);
  const id = await client.submit({ queue: "err", kind: "k" });
  const [job] = await client.lease(["err"]);
  await assert.rejects(client.ack(id, job.token + 1), (e) => e instanceof LeaseLost && /another worker may hold it/.test(e.message));
  await client.ack(id, job.token);
  await assert.rejects(client.nack(id, job.token, "late"), (e) => e instanceof InvalidState && /SUCCEEDED/.test(e.message));
  await assert.rejects(client.cancel(123456), NotFound);
  await assert.rejects(client.submit({ queue: "bad queue!", kind: "k" }), (e) => e instanceof InvalidInput && e.code === "invalid_input");
  await assert.rejects(client.submit({ queue: "err", kind: "k", payload: "x".repeat(2 << 20) }), (e) => (e instanceof PayloadTooLarge || e instanceof InvalidInput) && /limit/.test(e.message));
  assert.equal((await client.stats()).err.SUCCEEDED, 1);
  const port = await freePort();
  await assert.rejects(new Client(`http://127.0.0.1:${port}`, { token: "t", timeoutMs: 2000 }).stats(), (e) => e instanceof Unavailable && e instanceof RelayError && /relay serve/.test(e.message));
});

test("tags", async () => {
  const tagged = await client.submit({ queue: "tags", kind: "k", tags: ["vip", "eu"] });
  assert.deepEqual((await client.get(tagged)).tags, ["vip", "eu"]);
  assert.deepEqual((await client.get(await client.submit({ queue: "tags", kind: "k" }))).tags, []);
});

test("groups take turns, and their limit holds", async () => {
  for (let i = 0; i < 5; i++) await client.submit({ queue: "tenants", kind: "k", payload: "big", group: "big" });
  await client.submit({ queue: "tenants", kind: "k", payload: "small", group: "small" });
  const id = await client.submit({ queue: "tenants", kind: "k", payload: "small", group: "small" });
  assert.equal((await client.get(id)).group, "small");
  // One of each group a round: the small group's two before the big one's third.
  const leased = await client.lease(["tenants"], { max: 4 });
  assert.deepEqual(leased.map((j) => j.payload), ["big", "small", "big", "small"]);
  assert.deepEqual(leased.map((j) => j.group), ["big", "small", "big", "small"]);
  const limits = await client.setQueueLimits("tenants", { maxLeasedPerGroup: 2 });
  assert.equal(limits.maxLeasedPerGroup, 2);
  assert.deepEqual(await client.lease(["tenants"], { max: 10 }), [], "big already holds two leases");
  await assert.rejects(client.submit({ queue: "tenants", kind: "k", group: "" }), InvalidInput);
});

test("work: a mixed batch answered item by item, with a lease; repeating it applies nothing twice", async () => {
  const [a, stale, doomed, later, bytes, next] = await client.submitBatch([0, 1, 2, 3, 4, 5].map((i) => ({ queue: "mix", kind: "k", payload: { i } })));
  const held = new Map((await client.lease(["mix"], { max: 5 })).map((j) => [j.id, j]));
  const tok = (id) => held.get(id).token;
  const outcomes = [
    { id: a, token: tok(a), outcome: "ack", result: { sent: true } },
    { id: stale, token: tok(stale) + 1, outcome: "ack" },
    { id: doomed, token: tok(doomed), outcome: "nack", error: "never works", permanent: true },
    { id: later, token: tok(later), outcome: "release", inMs: 600_000 },
    { id: bytes, token: tok(bytes), outcome: "ack", result: new Uint8Array([0, 255]) },
  ];
  const first = await client.work(outcomes, { queues: ["mix"], max: 5, leaseForMs: 60_000 });
  assert.deepEqual(first.outcomes.map((o) => [o.id, o.state ?? o.error.code]), [
    [a, "SUCCEEDED"],
    [stale, "lease_lost"],
    [doomed, "DEAD"],
    [later, "SCHEDULED"],
    [bytes, "SUCCEEDED"],
  ]);
  assert.ok(first.outcomes[1].error instanceof LeaseLost, "an item's error is the class of its code, returned");
  assert.ok(Date.parse(first.outcomes[3].readyAt) > Date.now() + 500_000, `due in ten minutes: ${first.outcomes[3].readyAt}`);
  // The claim ran after the outcomes: only `next` is ready (`later` is snoozed).
  assert.deepEqual(first.jobs.map((j) => [j.id, j.payload]), [[next, { i: 5 }]]);
  assert.equal(first.jobs[0].leaseForMs, 60_000);

  // The same call again (an answer lost, say): the acks are answered OK,
  // the rest refused, nothing applied twice, nothing leased again.
  const again = await client.work(outcomes, { queues: ["mix"], max: 5 });
  assert.deepEqual(again.outcomes.map((o) => [o.id, o.state ?? o.error.code]), [
    [a, "SUCCEEDED"],
    [stale, "lease_lost"],
    [doomed, "invalid_state"],
    [later, "lease_lost"],
    [bytes, "SUCCEEDED"],
  ]);
  assert.ok(again.outcomes[2].error instanceof InvalidState);
  assert.deepEqual(again.jobs, []);
  const kinds = async (id) => (await client.events(id)).map((e) => e.kind);
  assert.deepEqual(await kinds(a), ["submitted", "leased", "succeeded"]);
  assert.deepEqual(await kinds(doomed), ["submitted", "leased", "failed"]);
  assert.deepEqual(await kinds(later), ["submitted", "leased", "snoozed"]);
  assert.deepEqual((await client.get(a)).result, { sent: true });
  assert.deepEqual((await client.get(bytes)).result, new Uint8Array([0, 255]));
  assert.deepEqual([(await client.get(stale)).state, (await client.get(doomed)).state], ["LEASED", "DEAD"]);

  // Only a malformed call fails whole, applying nothing.
  await assert.rejects(client.work([{ id: next, token: first.jobs[0].token, outcome: "ack" }], { queues: ["bad queue!"] }), InvalidInput);
  await assert.rejects(client.work([{ id: next, token: first.jobs[0].token, outcome: "release", inMs: -1 }]), InvalidRequest);
  assert.equal((await client.get(next)).state, "LEASED");
});

test("heartbeat: an empty one renews nothing (issue 42: it was a 400)", async () => {
  assert.deepEqual(await client.heartbeat([]), []);
});

test("heartbeat: many leases extended in one call, each answered", async () => {
  const [held, done, gone] = await client.submitBatch([0, 1, 2].map(() => ({ queue: "hb", kind: "k" })));
  const jobs = new Map((await client.lease(["hb"], { max: 3, leaseForMs: 5_000 })).map((j) => [j.id, j]));
  await client.ack(done, jobs.get(done).token);
  await client.cancel(gone);
  await client.delete(gone);
  const leases = [...jobs.values()].map((j) => ({ id: j.id, token: j.token }));
  leases.push({ id: held, token: jobs.get(held).token + 1 });
  const answers = await client.heartbeat(leases, 120_000);
  assert.deepEqual(answers.map((a) => [a.id, a.leaseExpiresAt ? "extended" : a.error.constructor.name]), [
    [held, "extended"],
    [done, "InvalidState"],
    [gone, "NotFound"],
    [held, "LeaseLost"],
  ]);
  assert.ok(Date.parse(answers[0].leaseExpiresAt) > Date.now() + 100_000, "extended by the call's lease_for_ms");
  const [own] = await client.heartbeat([{ id: held, token: jobs.get(held).token, leaseForMs: 1_000 }], 120_000);
  assert.ok(Date.parse(own.leaseExpiresAt) < Date.now() + 5_000, "a lease's own lease_for_ms wins");
});

test("an idempotency key makes one job, even after that job finished", async () => {
  const first = await client.submitJob({ queue: "idem", kind: "charge", payload: { order: 1 }, idempotencyKey: "order-1" });
  assert.equal(first.existing, false);
  assert.deepEqual(await client.submitJob({ queue: "idem", kind: "charge", payload: { order: 1 }, idempotencyKey: "order-1" }), { id: first.id, existing: true });
  assert.equal(await client.submit({ queue: "idem", kind: "charge", idempotencyKey: "order-1" }), first.id);
  const [job] = await client.lease(["idem"]);
  assert.equal(job.id, first.id);
  await client.ack(job.id, job.token);
  assert.equal((await client.get(first.id)).state, "SUCCEEDED");
  // Unlike a unique key, the idempotency key still holds once the job finished.
  assert.deepEqual(await client.submitJob({ queue: "idem", kind: "charge", payload: { order: 1 }, idempotencyKey: "order-1" }), { id: first.id, existing: true });
  const other = await client.submitJob({ queue: "idem", kind: "charge", payload: { order: 2 }, idempotencyKey: "order-2" });
  assert.ok(other.id !== first.id && other.existing === false);
  const made = (await client.jobs({ queue: "idem" })).map((j) => j.id).sort((a, b) => a - b);
  assert.deepEqual(made, [first.id, other.id], "two jobs made, no more");
});

test("a batch with an idempotency key answers the same ids again", async () => {
  const jobs = [0, 1, 2].map((i) => ({ queue: "idem-batch", kind: "k", payload: { i } }));
  const ids = await client.submitBatch(jobs, { idempotencyKey: "batch-1" });
  assert.deepEqual(await client.submitBatch(jobs, { idempotencyKey: "batch-1" }), ids);
  assert.equal((await client.jobs({ queue: "idem-batch" })).length, 3, "the repeat made nothing");
  // The header's key K gives the jobs K/0, K/1, ... by index.
  assert.deepEqual(await client.submitJob({ queue: "idem-batch", kind: "k", idempotencyKey: "batch-1/1" }), { id: ids[1], existing: true });
  // A job may carry its own key, which wins over the header's.
  const mine = await client.submit({ queue: "idem-batch", kind: "k", idempotencyKey: "mine" });
  const mixed = [{ queue: "idem-batch", kind: "k" }, { queue: "idem-batch", kind: "k", idempotencyKey: "mine" }];
  const other = await client.submitBatch(mixed, { idempotencyKey: "batch-2" });
  assert.ok(other[1] === mine && !ids.includes(other[0]));
  assert.deepEqual(await client.submitBatch(mixed, { idempotencyKey: "batch-2" }), other);
  assert.equal((await client.jobs({ queue: "idem-batch" })).length, 5);
});

test("stats follows every page of queues; statsPage reads one", async () => {
  // A server of its own: the server answers 1,000 queues a page.
  const own = await startServer();
  try {
    const c = new Client(own.url, { token: own.token });
    const name = (i) => `q${String(i).padStart(4, "0")}`;
    await c.submitBatch(Array.from({ length: 1003 }, (_, i) => ({ queue: name(i), kind: "k", payload: {} })));
    await c.submit({ queue: "q0007", kind: "k", payload: {} });
    const stats = await c.stats();
    assert.equal(Object.keys(stats).length, 1003);
    assert.equal(stats.q1002.READY, 1);
    assert.equal(stats.q0007.READY, 2);
    const first = await c.statsPage({ limit: 2 });
    assert.deepEqual(Object.keys(first.queues), ["q0000", "q0001"]);
    assert.equal(first.next, "q0001");
    assert.equal(first.totals.queues, 1003);
    assert.equal(first.totals.jobs.READY, 1004);
    const last = await c.statsPage({ after: "q1000" });
    assert.deepEqual(Object.keys(last.queues), ["q1001", "q1002"]);
    assert.equal(last.next, null);
    assert.equal(last.totals, null);
    await assert.rejects(c.statsPage({ limit: 1001 }), (e) => e instanceof InvalidRequest && /limit/.test(e.message));
  } finally {
    own.stop();
  }
});

test("a URL without http:// or https:// is refused at once, not retried as an outage (issue 42)", () => {
  for (const url of ["127.0.0.1:7433", "localhost:7433", "ftp://example.com", "not a url"]) {
    assert.throws(() => new Client(url), (e) => e instanceof TypeError && /not an http:\/\/ or https:\/\/ URL/.test(e.message), url);
  }
  assert.equal(new Client("http://127.0.0.1:7433/").url, "http://127.0.0.1:7433");
});
