// Durable steps (issue 40) against a real `relay serve`: a handler records
// each step's output under its lease with ctx.step, and a later attempt
// resolves the recorded outputs without running their bodies again.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { ChildFailed, Client, LeaseLost, NotFound, Permanent, Retry, StepBound, TokenUsed, Worker } from "../dist/index.js";
import { startServer, waitFor } from "./server.mjs";

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(() => server.stop());

test("a retry skips the steps an earlier attempt recorded", async () => {
  const id = await client.submit({ queue: "steps", kind: "order", payload: { cents: 4200 }, maxAttempts: 3 });
  const runs = { charge: 0, label: 0, email: 0 };
  const worker = new Worker(client, ["steps"], { concurrency: 2, pollMs: 300, handleSignals: false });
  worker.handle("order", async (job, ctx) => {
    const charge = await ctx.step("charge", async () => {
      runs.charge++;
      return { id: ctx.key("charge"), charge_id: "ch_1" };
    });
    const label = await ctx.step("label", () => {
      runs.label++;
      if (job.attempt === 1) throw new Retry("the label printer is off", 0);
      return new Uint8Array([0x80, 1, 2]);
    });
    await ctx.step("email", () => {
      runs.email++;
    });
    return { charge: charge.id, chargeId: charge.charge_id, labelBytes: label.length };
  });
  const run = worker.run();
  await waitFor("the order", async () => (await client.get(id)).state === "SUCCEEDED");
  worker.stop();
  await run;
  const job = await client.get(id);
  assert.deepEqual(job.result, { charge: `relay-${id}-charge`, chargeId: "ch_1", labelBytes: 3 });
  assert.deepEqual(runs, { charge: 1, label: 2, email: 1 });
  assert.deepEqual(job.steps.map((s) => [s.name, s.attempt]), [["charge", 1], ["label", 2], ["email", 2]]);
  // A step's JSON output is kept as written (its keys are not renamed).
  assert.deepEqual(job.steps[0].output, { id: `relay-${id}-charge`, charge_id: "ch_1" });
  assert.deepEqual(job.steps[1].output, new Uint8Array([0x80, 1, 2]));
  assert.equal(job.steps[2].output, null);
});

test("recordStep is fenced and the first record stands", async () => {
  const id = await client.submit({ queue: "fenced", kind: "k", maxAttempts: 5 });
  const [old] = await client.lease(["fenced"], { leaseForMs: 300 });
  assert.deepEqual(await client.recordStep(id, old.token, "charge", { n: 1 }), { recorded: true, output: { n: 1 } });
  assert.deepEqual(await client.recordStep(id, old.token, "charge", { n: 2 }), { recorded: false, output: { n: 1 } });
  await new Promise((r) => setTimeout(r, 400));
  const [fresh] = await client.lease(["fenced"], { leaseForMs: 30_000 });
  assert.deepEqual(fresh.steps.map((s) => [s.name, s.output]), [["charge", { n: 1 }]]);
  await assert.rejects(client.recordStep(id, old.token, "email", "old"), LeaseLost);
  await client.recordStep(id, fresh.token, "email", "new");
  assert.deepEqual((await client.get(id)).steps.map((s) => s.name), ["charge", "email"]);
  await assert.rejects(client.recordStep(id, fresh.token, "big", new Uint8Array(1 << 20)), StepBound);
});

test("a sleep frees the slot and the job goes on after it", async () => {
  const sleeper = await client.submit({ queue: "nap", kind: "sleeper" });
  const order = [];
  const worker = new Worker(client, ["nap"], { concurrency: 1, pollMs: 300, handleSignals: false });
  worker
    .handle("sleeper", async (job, ctx) => {
      await ctx.step("before", async () => {
        order.push("before");
        await client.submit({ queue: "nap", kind: "other" });
      });
      await ctx.sleep("nap", 600);
      await ctx.step("after", () => {
        order.push("after");
      });
    })
    .handle("other", () => {
      order.push("other");
    });
  const run = worker.run();
  await waitFor("the sleeper", async () => (await client.get(sleeper)).state === "SUCCEEDED");
  worker.stop();
  await run;
  assert.deepEqual(order, ["before", "other", "after"]);
  assert.equal(worker.stats.slept, 1);
  const job = await client.get(sleeper);
  assert.equal(job.attempts, 1);
  assert.deepEqual(job.steps.map((s) => s.name), ["before", "nap", "after"]);
  assert.equal(typeof job.steps[1].output.sleep_until_ms, "number");
  const kinds = (await client.events(sleeper)).map((e) => e.kind);
  assert.equal(kinds.filter((k) => k === "leased").length, 2);
});

test("waitEvent goes on with the payload or times out", async () => {
  const { TimedOut } = await import("../dist/index.js");
  const approved = await client.submit({ queue: "approvals", kind: "approve" });
  const ignored = await client.submit({ queue: "approvals", kind: "approve" });
  const asked = [];
  const worker = new Worker(client, ["approvals"], { concurrency: 2, pollMs: 300, handleSignals: false });
  worker.handle("approve", async (job, ctx) => {
    await ctx.step("ask", () => {
      asked.push(job.id);
    });
    try {
      const answer = await ctx.waitEvent("approval", `approved:${job.id}`, job.id === approved ? 60_000 : 300);
      return `approved by ${answer.by}`;
    } catch (e) {
      if (e instanceof TimedOut) return "timed out";
      throw e;
    }
  });
  const run = worker.run();
  await waitFor("the first job to wait", async () => (await client.get(approved)).state === "WAITING");
  assert.deepEqual(await client.emit(`approved:${approved}`, { by: "ada" }), { first: true, woken: 1 });
  assert.deepEqual(await client.emit(`approved:${approved}`, { by: "eve" }), { first: false, woken: 0 });
  await waitFor("both", async () => (await client.get(approved)).state === "SUCCEEDED" && (await client.get(ignored)).state === "SUCCEEDED");
  worker.stop();
  await run;
  assert.equal((await client.get(approved)).result, "approved by ada");
  assert.equal((await client.get(ignored)).result, "timed out");
  assert.deepEqual(asked.sort(), [approved, ignored].sort());
});

test("retry keeps the steps unless resetSteps", async () => {
  const id = await client.submit({ queue: "resets", kind: "k", maxAttempts: 1 });
  const failWithAStep = async () => {
    const [job] = await client.lease(["resets"]);
    await client.recordStep(id, job.token, "charge", 1);
    await client.nack(id, job.token, "boom");
  };
  await failWithAStep();
  await client.retry(id);
  assert.deepEqual((await client.get(id)).steps.map((s) => s.name), ["charge"]);
  await failWithAStep();
  await client.retry(id, { resetSteps: true });
  const job = await client.get(id);
  assert.deepEqual([job.state, job.steps], ["READY", undefined]);
});

async function requestsTo(route) {
  let total = 0;
  for (const line of (await client.metrics()).split("\n")) {
    if (line.startsWith("relay_http_requests_total{") && line.includes(`route="${route}"`)) total += Number(line.split(" ").pop());
  }
  return total;
}

test("a worker's step records ride on its work calls", async () => {
  // Item 7: no call of their own; each handler gets its own answer; a
  // record after the job was cancelled under it rejects and writes nothing.
  const before = await requestsTo("/v1/jobs/{id}/steps");
  const ids = [];
  for (let n = 0; n < 40; n++) ids.push(await client.submit({ queue: "ride", kind: "flow", payload: { n } }));
  const cancelMe = await client.submit({ queue: "ride", kind: "cancelled" });
  let recordedA;
  const aRecorded = new Promise((r) => (recordedA = r));
  let goOn;
  const proceed = new Promise((r) => (goOn = r));
  const raised = [];
  const worker = new Worker(client, ["ride"], { concurrency: 8, pollMs: 300, handleSignals: false });
  worker
    .handle("flow", async (job, ctx) => {
      const a = await ctx.step("a", () => ({ n: job.payload.n }));
      const b = await ctx.step("b", () => new Uint8Array([job.payload.n]));
      const again = await ctx.step("a", () => "not run");
      return { a: a.n, b: b[0], again };
    })
    .handle("cancelled", async (job, ctx) => {
      await ctx.step("a", () => 1);
      recordedA();
      await proceed;
      try {
        await ctx.step("b", () => 2);
      } catch (e) {
        raised.push(e);
        throw e;
      }
    });
  const run = worker.run();
  await aRecorded;
  await client.cancel(cancelMe);
  goOn();
  await waitFor("the flows", async () => (await Promise.all(ids.map((i) => client.get(i)))).every((j) => j.state === "SUCCEEDED"));
  await waitFor("the cancelled job's handler", async () => raised.length > 0);
  worker.stop();
  await run;
  for (const [n, id] of ids.entries()) {
    const job = await client.get(id);
    assert.deepEqual(job.result, { a: n, b: n, again: { n } });
    assert.deepEqual(job.steps.map((s) => s.name), ["a", "b"]);
  }
  assert.ok(["lease_lost", "invalid_state"].includes(raised[0].code), String(raised[0]));
  assert.deepEqual((await client.get(cancelMe)).steps.map((s) => s.name), ["a"]);
  assert.equal(await requestsTo("/v1/jobs/{id}/steps"), before, "a step record took a call of its own");
});

test("result awaits the end of a job", async () => {
  // Item 5: woken by the ack's commit; null when the time runs out first.
  const id = await client.submit({ queue: "awaited", kind: "k" });
  const lonely = await client.submit({ queue: "nobody", kind: "k" });
  setTimeout(async () => {
    const [job] = await client.lease(["awaited"]);
    await client.ack(job.id, job.token, { total: 42 });
  }, 200);
  const done = await client.result(id, 20_000);
  assert.equal(done.state, "SUCCEEDED");
  assert.deepEqual(done.result, { total: 42 });
  assert.equal(await client.result(lonely, 200), null);
  await assert.rejects(client.result(lonely + 1000, 1000), NotFound);
});

test("a handler spawns a child once and joins it", async () => {
  // Item 5: one slot; the children run while their parent waits.
  const id = await client.submit({ queue: "family", kind: "parent" });
  let spawned = 0;
  const worker = new Worker(client, ["family"], { concurrency: 1, pollMs: 300, handleSignals: false });
  worker
    .handle("parent", async (job, ctx) => {
      const label = await ctx.spawn("label", { queue: "family", kind: "child", payload: { n: 7 } }).then((v) => (spawned++, v));
      const broken = await ctx.spawn("broken", { queue: "family", kind: "broken", maxAttempts: 1 });
      const printed = await ctx.join("label-printed", label);
      try {
        await ctx.join("broken-ended", broken);
      } catch (e) {
        if (!(e instanceof ChildFailed)) throw e;
        return { label: printed, broken: [e.state, e.error] };
      }
      return { label: printed };
    })
    .handle("child", async (job) => ({ label: `L-${job.payload.n}` }))
    .handle("broken", async () => {
      throw new Permanent("the printer caught fire");
    });
  const run = worker.run();
  await waitFor("the parent", async () => ["SUCCEEDED", "DEAD"].includes((await client.get(id)).state));
  worker.stop();
  await run;
  const job = await client.get(id);
  assert.equal(job.state, "SUCCEEDED", job.lastError);
  assert.deepEqual(job.result.label, { label: "L-7" });
  assert.equal(job.result.broken[0], "DEAD");
  assert.match(job.result.broken[1], /caught fire/);
  assert.ok(spawned >= 1);
  const children = (await client.jobs({ queue: "family" })).filter((j) => j.kind !== "parent");
  assert.equal(children.length, 2, "each child submitted once");
});

test("a completion token wakes its job once", async () => {
  // Item 4: completed from a client without the API token, once.
  const id = await client.submit({ queue: "approvals", kind: "approve" });
  const urls = [];
  const worker = new Worker(client, ["approvals"], { concurrency: 2, pollMs: 300, handleSignals: false });
  worker.handle("approve", async (job, ctx) => {
    const token = await ctx.token("approval-token", 3_600_000);
    await ctx.step("email", () => {
      urls.push(token.url);
    });
    const decision = await ctx.waitToken("approval", token);
    return { decision };
  });
  const run = worker.run();
  await waitFor("the approval email", async () => urls.length > 0 && (await client.get(id)).state === "WAITING");
  const outsider = new Client(server.url);
  assert.deepEqual(await outsider.completeToken(urls[0], { approvedBy: "ada" }), { completed: true, woken: 1 });
  await assert.rejects(outsider.completeToken(urls[0], { approvedBy: "eve" }), TokenUsed);
  await waitFor("the order", async () => (await client.get(id)).state === "SUCCEEDED");
  worker.stop();
  await run;
  assert.deepEqual((await client.get(id)).result, { decision: { approvedBy: "ada" } });
  assert.equal(urls.length, 1);
});
