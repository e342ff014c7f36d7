// The guides' JavaScript examples run as written against a real server.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "../dist/index.js";
import { startServer } from "./server.mjs";

let server;
before(async () => (server = await startServer()));
after(() => server.stop());

test("the durable execution guide runs as written", async () => {
  const guide = readFileSync(fileURLToPath(new URL("../../../docs/guides/durable-execution.md", import.meta.url)), "utf8");
  const snippet = guide.split("## In TypeScript and JavaScript")[1]?.match(/```js\n([\s\S]*?)```/)?.[1];
  assert.ok(snippet, "the guide has no JavaScript example under 'In TypeScript and JavaScript'");
  // Inside the package, so that `import ... from "relay-client"` resolves to it.
  const file = fileURLToPath(new URL("../guide-snippet.tmp.mjs", import.meta.url));
  writeFileSync(file, snippet);
  const child = spawn(process.execPath, [file], { env: { ...process.env, RELAY_URL: server.url, RELAY_TOKEN: server.token } });
  let out = "";
  let err = "";
  child.stderr.on("data", (d) => (err += d));
  const exited = new Promise((ok) => child.on("exit", ok));
  await new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error(`no receipt in 30 s: ${out} ${err}`)), 30_000);
    child.stdout.on("data", (d) => {
      out += d;
      if (out.includes("\n")) {
        clearTimeout(timer);
        ok();
      }
    });
  });
  // Charged, asleep half a second (the worker free meanwhile), then the email.
  assert.equal(out, "receipt ch_4200, parcel 1Z999, to ada\n");
  child.kill("SIGTERM");
  await exited;
  const client = new Client(server.url, { token: server.token });
  const [job] = await client.jobs({ queue: "orders" });
  assert.deepEqual([job.state, job.attempts], ["SUCCEEDED", 1]);
  assert.deepEqual(job.steps.map((s) => s.name), ["charge", "cool-off", "shipment", "email"]);
  client.close();
});
