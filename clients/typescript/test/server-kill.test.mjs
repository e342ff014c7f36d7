// Issue 40, acceptance 3: the server killed with SIGKILL (three times, and
// started again on its file and port) under a Worker running 1,000
// five-step workflows, each with a sleep and a wait for an event that the
// test emits meanwhile: every workflow finishes, and each step's body ran
// exactly once (the Worker never dies here, so no body may run again: a
// record, ack, sleep or wait whose call the kill cut is sent again, and the
// server answers it from what it recorded).
import assert from "node:assert/strict";
import { test } from "node:test";
import { Client, Worker } from "../dist/index.js";
import { startServer, waitFor } from "./server.mjs";

const WORKFLOWS = 1000;
const STEPS = 5;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

test("kill -9 of the server under 1,000 workflows: all finish, each step body ran once", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const client = new Client(server.url, { token: server.token, timeoutMs: 5000 });
  const ids = await client.submitBatch(Array.from({ length: WORKFLOWS }, () => ({ queue: "flows", kind: "flow" })));

  const ran = new Map();
  const body = (id, i) => {
    const k = `${id}/${i}`;
    ran.set(k, (ran.get(k) ?? 0) + 1);
    return `${id}-${i}`;
  };
  const worker = new Worker(client, ["flows"], {
    concurrency: 32,
    leaseForMs: 5000,
    beatEveryMs: 500,
    pollMs: 500,
    handleSignals: false,
  });
  t.after(() => worker.stop());
  worker.handle("flow", async (job, ctx) => {
    const out = [];
    for (let i = 0; i < STEPS; i++) {
      if (i === 2) await ctx.sleep("nap", 50);
      if (i === 4) await ctx.waitEvent("go", `go:${job.id}`, 600_000);
      out.push(await ctx.step(`s${i}`, () => body(job.id, i)));
    }
    return out;
  });

  // The events, emitted in order while the workflows run (some before their
  // job waits, most after), each retried until the server answers.
  let emitting = true;
  const emitter = (async () => {
    for (const id of ids) {
      while (emitting) {
        try {
          await client.emit(`go:${id}`, { id });
          break;
        } catch {
          await sleep(50);
        }
      }
      await sleep(3);
    }
  })();

  const said = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = (chunk, ...rest) => (said.push(String(chunk)), write(chunk, ...rest));
  const run = worker.run();
  const finishedAtKills = [];
  try {
    for (let k = 0; k < 3; k++) {
      await sleep(600 + Math.random() * 900);
      finishedAtKills.push((await client.stats()).flows?.SUCCEEDED ?? 0);
      await server.kill();
      await sleep(300);
      await server.restart();
    }
    await waitFor(
      "every workflow to finish",
      async () => {
        try {
          return ((await client.stats()).flows?.SUCCEEDED ?? 0) === WORKFLOWS;
        } catch {
          return false;
        }
      },
      180_000,
    );
    worker.stop();
    await run;
    await emitter;
  } finally {
    emitting = false;
    process.stderr.write = write;
  }
  for (const id of ids.filter((_, n) => n % 20 === 0)) {
    const job = await client.get(id);
    assert.deepEqual(job.result, Array.from({ length: STEPS }, (_, i) => `${id}-${i}`));
    assert.deepEqual(job.steps.map((s) => s.name), ["s0", "s1", "nap", "s2", "s3", "go", "s4"]);
    assert.deepEqual(job.steps[5].output, { event: { id } });
  }
  const missing = [];
  for (const id of ids) for (let i = 0; i < STEPS; i++) if (!ran.has(`${id}/${i}`)) missing.push(`${id}/${i}`);
  const again = [...ran].filter(([, n]) => n > 1);
  assert.deepEqual(missing.slice(0, 5), [], `${missing.length} step bodies never ran`);
  assert.deepEqual(again.slice(0, 5), [], `${again.length} step bodies ran more than once`);
  assert.ok(finishedAtKills[0] < WORKFLOWS, "the first kill came after the work: it proves nothing");
  assert.ok(said.some((l) => l.includes("answers again")), said.join("\n"));
  console.log(
    `${WORKFLOWS} workflows across 3 kills of the server (finished before each: ${finishedAtKills.join(", ")}): ` +
      `${[...ran.values()].reduce((a, b) => a + b, 0)} step bodies, each ran once`,
  );
});
