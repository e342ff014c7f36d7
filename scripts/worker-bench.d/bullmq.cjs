// BullMQ's side of scripts/worker-bench, run with the BullMQ (and ioredis)
// that script installs into NODE_DIR (target/worker-bench/node).
//
//   node bullmq.cjs NODE_DIR PORT add N
//       queues N no-op jobs (name "k", data {}) on queue "q" with
//       Queue.addBulk, 1,000 a call, then exits. Completed jobs are kept
//       (BullMQ's default), so the bench counts them in bull:q:completed.
//   node bullmq.cjs NODE_DIR PORT work C [STAMPS]
//       a Worker on "q", C jobs at once, with a no-op processor. Prints
//       READY once connected and built, just before its loop starts; on
//       SIGTERM or SIGINT closes the worker (running jobs finish) and
//       exits 0. With STAMPS, each job's start (process.hrtime, ns) is
//       recorded and written there, one a line, when it stops.
"use strict";

const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [nodeDir, port, mode, count, stampsPath] = process.argv.slice(2);
const { Queue, Worker } = createRequire(path.join(nodeDir, "package.json"))("bullmq");
const connection = { host: "127.0.0.1", port: Number(port) };

async function add(total) {
  const queue = new Queue("q", { connection });
  for (let start = 0; start < total; start += 1000) {
    const batch = [];
    for (let i = start; i < Math.min(total, start + 1000); i++) batch.push({ name: "k", data: {} });
    await queue.addBulk(batch);
  }
  await queue.close();
}

async function work(concurrency) {
  const stamps = [];
  const processor = stampsPath
    ? async () => {
        stamps.push(process.hrtime.bigint());
      }
    : async () => undefined;
  const worker = new Worker("q", processor, { connection, concurrency, autorun: false });
  worker.on("error", (e) => console.error("bullmq worker:", e));
  await worker.waitUntilReady();
  let stopping = false;
  const stop = async () => {
    if (stopping) return;
    stopping = true;
    await worker.close();
    if (stampsPath) fs.writeFileSync(stampsPath, stamps.join("\n"));
    process.exit(0);
  };
  process.on("SIGTERM", stop);
  process.on("SIGINT", stop);
  console.log("READY");
  await worker.run();
}

const n = Number(count);
if (!Number.isInteger(n) || n < 1 || (mode !== "add" && mode !== "work")) {
  console.error("usage: node bullmq.cjs NODE_DIR PORT add N | work C [STAMPS]");
  process.exit(2);
}
(mode === "add" ? add(n).then(() => process.exit(0)) : work(n)).catch((e) => {
  console.error(e);
  process.exit(1);
});
