// Every operation of /openapi.json has a method on the client, and the calls
// operators use (search, bulk actions, dead groups, queues, pause, limits,
// schedules, health, metrics) work against a real `relay serve`. Each test
// uses queues of its own: they share one server.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Client, InvalidInput, InvalidRequest, LeaseLost, NotFound } from "../dist/index.js";
import { startServer } from "./server.mjs";

// Operations whose method has another name than the operationId.
const RENAMED = { list: "listJobs" };

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

test("every operation of /openapi.json has a client method", async () => {
  const doc = await (await fetch(`${server.url}/openapi.json`)).json();
  const operations = Object.values(doc.paths).flatMap((ops) =>
    Object.entries(ops)
      .filter(([method]) => ["get", "put", "post", "delete", "patch"].includes(method))
      .map(([, op]) => op.operationId),
  );
  assert.ok(operations.length >= 30, String(operations));
  const missing = operations
    .map((op) => [op, RENAMED[op] ?? op])
    .filter(([, name]) => typeof Client.prototype[name] !== "function")
    .map(([op, name]) => `${op} (Client.${name})`);
  assert.deepEqual(missing, [], `operations of /openapi.json without a client method: ${missing}`);
});

test("search pages through every filter", async () => {
  const ids = await client.submitBatch([
    ...[0, 1, 2, 3, 4].map((i) => ({ queue: "mail", kind: "send", payload: { i }, tags: i % 2 ? ["vip"] : undefined })),
    { queue: "sms", kind: "send" },
  ]);
  const page = await client.listJobs({ queue: "mail", limit: 2 });
  assert.deepEqual(page.jobs.map((j) => j.id), [ids[4], ids[3]]);
  assert.notEqual(page.next, null);
  const all = [];
  for await (const j of client.iterJobs({ queue: "mail", limit: 2 })) all.push(j.id);
  assert.deepEqual(all, ids.slice(0, 5).reverse());
  assert.deepEqual((await client.listJobs({ tag: "vip" })).jobs.map((j) => j.id), [ids[3], ids[1]]);
  assert.deepEqual((await client.listJobs({ kind: "nope" })).jobs, []);
  assert.equal((await client.listJobs({ queue: "sms", limit: 1000 })).next, null);
  assert.ok((await client.jobs({ queue: "", state: "" })).length >= 6, "an empty filter is none");
  await assert.rejects(client.listJobs({ since: "yesterday" }), InvalidRequest);
});

test("bulk actions and dead groups", async () => {
  const ids = await client.submitBatch([0, 1, 2].map((i) => ({ queue: "bulkq", kind: "k", payload: i, maxAttempts: 1 })));
  for (const j of await client.lease(["bulkq"], { max: 3 })) await client.nack(j.id, j.token, "smtp down\nat line 2");
  const groups = (await client.deadGroups()).filter((g) => g.queue === "bulkq");
  assert.equal(groups.length, 1);
  const [g] = groups;
  assert.deepEqual([g.kind, g.error, g.count, g.newest], ["k", "smtp down", 3, ids[2]]);
  assert.match(g.lastAt, /Z$/);
  assert.equal(await client.bulk("retry", { queue: "bulkq", state: "DEAD" }), 3);
  for (const id of ids) assert.equal((await client.get(id)).state, "READY");
  assert.equal(await client.bulk("cancel", { queue: "bulkq", errorContains: "smtp" }), 3);
  assert.equal(await client.bulk("delete", { queue: "bulkq", state: "CANCELLED" }), 3);
  assert.deepEqual((await client.listJobs({ queue: "bulkq" })).jobs, []);
  await client.submit({ queue: "bulkq", kind: "k" });
  await assert.rejects(client.bulk("delete", {}), InvalidRequest); // no filter: refused
  assert.equal((await client.listJobs({ queue: "bulkq" })).jobs.length, 1);
});

test("queues, pause and limits", async () => {
  for (const q of ["qa", "qb", "qc"]) await client.submit({ queue: q, kind: "k" });
  const names = await client.queues();
  assert.deepEqual(names.filter((n) => n.startsWith("q") && n.length === 2), ["qa", "qb", "qc"]);
  const first = await client.queuesPage({ limit: 1 });
  assert.equal(first.queues.length, 1);
  assert.equal(first.next, first.queues[0]);
  assert.equal(await client.pauseQueue("qa"), true);
  assert.deepEqual(await client.lease(["qa"]), []);
  assert.equal((await client.stats()).qa.paused, true);
  const one = await client.getQueue("qa");
  assert.deepEqual([one.queue, one.READY, one.paused, one.max_leased], ["qa", 1, true, null]);
  assert.equal((await client.getQueue("unused")).READY, 0);
  assert.equal(await client.resumeQueue("qa"), false);
  assert.equal((await client.lease(["qa"])).length, 1);
  for (let i = 0; i < 3; i++) await client.submit({ queue: "qb", kind: "k" });
  const limits = await client.setQueueLimits("qb", { maxLeased: 2, rateLimit: { limit: 100, perMs: 1000 }, poisonAfter: 5 });
  assert.deepEqual(limits, { queue: "qb", maxLeased: 2, rateLimit: { limit: 100, perMs: 1000 }, poisonAfter: 5 });
  assert.equal((await client.lease(["qb"], { max: 10 })).length, 2);
  assert.deepEqual(await client.setQueueLimits("qb"), { queue: "qb", maxLeased: null, rateLimit: null, poisonAfter: null });
  assert.equal((await client.lease(["qb"], { max: 10 })).length, 2);
});

test("schedules from put to remove", async () => {
  const made = await client.putSchedule("nightly", { cron: "0 3 * * *", tz: "Europe/Paris" }, { queue: "reports", kind: "build", payload: { full: true }, priority: 2 });
  assert.deepEqual(
    [made.name, made.cron, made.tz, made.everyMs, made.paused, made.lastAt],
    ["nightly", "0 3 * * *", "Europe/Paris", null, false, null],
  );
  assert.deepEqual(made.job, { queue: "reports", kind: "build", payload: { full: true }, priority: 2, maxAttempts: made.job.maxAttempts });
  await client.putSchedule("often", { everyMs: 60_000 }, { queue: "q", kind: "tick", payload: new Uint8Array([0, 255]), group: "tenant-7" });
  const listed = await client.schedules();
  assert.deepEqual(listed.map((s) => s.name), ["nightly", "often"]);
  assert.deepEqual(listed[1].job.payload, new Uint8Array([0, 255]));
  assert.deepEqual([listed[0].job.group, listed[1].job.group], [undefined, "tenant-7"]);
  assert.equal((await client.pauseSchedule("often")).paused, true);
  const one = await client.getSchedule("often");
  assert.deepEqual([one.name, one.everyMs, one.paused, one.job.payload], ["often", 60_000, true, new Uint8Array([0, 255])]);
  assert.equal((await client.resumeSchedule("often")).paused, false);
  assert.equal(await client.removeSchedule("often"), true);
  await assert.rejects(client.removeSchedule("often"), NotFound);
  await assert.rejects(client.getSchedule("often"), NotFound);
  await assert.rejects(client.putSchedule("bad", { cron: "not cron" }, { queue: "q", kind: "k" }), InvalidInput);
  assert.deepEqual((await client.schedules()).map((s) => s.name), ["nightly"]);
});

test("retention and prune", async () => {
  const week = 7 * 24 * 3600 * 1000;
  assert.deepEqual(await client.getRetention("retained"), {
    queue: "retained",
    own: {},
    effective: { succeeded: week, dead: week, cancelled: week },
  });
  const kept = await client.setRetention("retained", { succeeded: 0, dead: "forever" });
  assert.deepEqual(kept.own, { succeeded: 0, dead: "forever" });
  assert.deepEqual(kept.effective, { succeeded: 0, dead: "forever", cancelled: week });
  assert.deepEqual(await client.getRetention("retained"), kept);
  await assert.rejects(client.setRetention("retained", { dead: 11 * 366 * 86_400_000 }), InvalidInput);
  assert.deepEqual(await client.getRetention("retained"), kept, "a refused retention changes nothing");
  const ok = await client.submit({ queue: "retained", kind: "k" });
  const dead = await client.submitJob({ queue: "retained", kind: "k", maxAttempts: 1 });
  for (const job of await client.lease(["retained"], { max: 2 })) {
    if (job.id === ok) await client.ack(job.id, job.token);
    else await client.nack(job.id, job.token, "bad");
  }
  // The server may prune the SUCCEEDED one by itself first.
  assert.ok([0, 1].includes(await client.prune()));
  await assert.rejects(client.get(ok), NotFound);
  assert.equal((await client.get(dead.id)).state, "DEAD", "DEAD is kept forever here");
  assert.deepEqual(await client.pruneFrom(0), { deleted: 0, next: null });
});

test("health and metrics", async () => {
  assert.deepEqual(await client.health(), { status: "ok" });
  await client.submit({ queue: "metricsq", kind: "k" });
  assert.match(await client.metrics(), /relay_jobs\{queue="metricsq",state="READY"\} 1/);
});

test("a throttled key answers its job even once finished", async () => {
  const first = await client.submitJob({ queue: "throttled", kind: "refresh", uniqueKey: "cache", throttleMs: 60_000 });
  assert.equal(first.existing, false);
  const [job] = await client.lease(["throttled"]);
  await client.ack(job.id, job.token);
  assert.deepEqual(await client.submitJob({ queue: "throttled", kind: "refresh", uniqueKey: "cache", throttleMs: 60_000 }), { id: first.id, existing: true });
  await assert.rejects(client.submitJob({ queue: "throttled", kind: "refresh", throttleMs: 60_000 }), InvalidInput);
});

test("a debounced key replaces its job until it starts", async () => {
  const job = (v) => ({ queue: "debounced", kind: "reindex", payload: { v }, uniqueKey: "doc", debounceMs: 60_000 });
  const first = await client.submitJob(job(1));
  assert.equal(first.existing, false);
  assert.deepEqual(await client.submitJob(job(2)), { id: first.id, existing: true });
  assert.deepEqual((await client.get(first.id)).payload, { v: 2 });
  assert.deepEqual(await client.lease(["debounced"]), [], "its run time is a minute away");
  await assert.rejects(client.submitJob({ queue: "debounced", kind: "reindex", debounceMs: 60_000 }), InvalidInput);
  await assert.rejects(client.submitJob({ ...job(3), delayMs: 5_000 }), InvalidInput);
});

test("progress is kept on the job", async () => {
  const { id } = await client.submitJob({ queue: "progressing", kind: "import" });
  const [job] = await client.lease(["progressing"]);
  assert.equal((await client.get(id)).progress, undefined);
  await client.progress(job.id, job.token, 0.25, "page 1 of 4");
  const kept = (await client.get(id)).progress;
  assert.deepEqual([kept.fraction, kept.message, kept.attempt], [0.25, "page 1 of 4", 1]);
  await assert.rejects(client.progress(job.id, job.token, 1.5), InvalidInput);
  await assert.rejects(client.progress(job.id, job.token + 1, 0.5), LeaseLost);
  assert.deepEqual((await client.get(id)).progress, kept, "refused reports change nothing");
});

test("a job's events come a page at a time (issue 39, item 4)", async () => {
  const id = await client.submit({ queue: "ev", kind: "k" });
  for (let i = 0; i < 1050; i++) await client.appendEvent(id, "note", { i });
  const first = await client.eventsPage(id);
  assert.equal(first.events.length, 1000);
  assert.equal(first.next, first.events[999].seq);
  const rest = await client.eventsPage(id, { after: first.next });
  assert.deepEqual(rest.events.map((e) => e.seq), Array.from({ length: 51 }, (_, i) => 1001 + i));
  assert.equal(rest.next, null);
  assert.equal((await client.events(id)).length, 1051);
  assert.equal((await client.eventsPage(id, { limit: 10 })).events.length, 10);
});
