// The README's TypeScript producer runs as written against a real server.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync, writeFileSync } from "node:fs";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { Client } from "../dist/index.js";
import { startServer } from "./server.mjs";

let server;
before(async () => (server = await startServer()));
after(() => server.stop());

test("the README's producer works as written", async () => {
  const readme = readFileSync(fileURLToPath(new URL("../../../README.md", import.meta.url)), "utf8");
  const section = readme.split("## From TypeScript")[1];
  const snippet = section?.match(/```ts\n([\s\S]*?)```/)?.[1];
  assert.ok(snippet, "README.md has no TypeScript snippet under 'From TypeScript'");
  // Inside the package, so that `import ... from "relay-client"` resolves to it.
  const file = fileURLToPath(new URL("../readme-snippet.tmp.mjs", import.meta.url));
  writeFileSync(file, snippet);
  const out = await new Promise((ok, fail) =>
    execFile(process.execPath, [file], { env: { ...process.env, RELAY_URL: server.url, RELAY_TOKEN: server.token } }, (e, stdout, stderr) =>
      e ? fail(new Error(`${e.message}\n${stderr}`)) : ok(stdout),
    ),
  );
  assert.match(out, /^submitted 1, 2, 3; report 4 waits for them\n$/);
  const client = new Client(server.url, { token: server.token });
  const report = await client.get(4);
  assert.deepEqual([report.state, report.waitingOn], ["WAITING", 3]);
  assert.deepEqual((await client.get(1)).payload, { to: "ada@example.com" });
});

test("the client README's operating calls work as written", async () => {
  const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
  const snippet = readme.split("## Operating queues")[1]?.match(/```ts\n([\s\S]*?)```/)?.[1];
  assert.ok(snippet, "clients/typescript/README.md has no snippet under 'Operating queues'");
  const server = await startServer(); // a store of its own: the producer above used "emails"
  try {
    const client = new Client(server.url, { token: server.token });
    const ids = await client.submitBatch([0, 1].map(() => ({ queue: "emails", kind: "send", maxAttempts: 1 })));
    for (const job of await client.lease(["emails"], { max: 2 })) await client.nack(job.id, job.token, "smtp down");
    const file = fileURLToPath(new URL("../readme-snippet.tmp.mjs", import.meta.url));
    writeFileSync(file, snippet.replace("http://127.0.0.1:7433", server.url).replace('"secret"', JSON.stringify(server.token)));
    const out = await new Promise((ok, fail) =>
      execFile(process.execPath, [file], (e, stdout, stderr) => (e ? fail(new Error(`${e.message}\n${stderr}`)) : ok(stdout))),
    );
    assert.deepEqual(out.trimEnd().split("\n"), [
      `${ids[1]} smtp down`,
      `${ids[0]} smtp down`,
      "emails send 2 smtp down",
      "2 retried",
      "[ 'digest' ] [ 'emails' ] ok",
    ]);
    for (const id of ids) assert.equal((await client.get(id)).state, "READY");
    assert.equal((await client.stats()).emails.max_leased, 10);
    client.close();
  } finally {
    await server.stop();
  }
});

test("the client README's worker protocol block runs under node as written (issue 42)", async () => {
  const readme = readFileSync(fileURLToPath(new URL("../README.md", import.meta.url)), "utf8");
  const snippet = readme.split("## The worker protocol")[1]?.match(/```ts\n([\s\S]*?)```/)?.[1];
  assert.ok(snippet, "clients/typescript/README.md has no snippet under 'The worker protocol'");
  const server = await startServer();
  try {
    const client = new Client(server.url, { token: server.token });
    const ids = await client.submitBatch([0, 1].map(() => ({ queue: "emails", kind: "send" })));
    const file = fileURLToPath(new URL("../readme-protocol.tmp.mjs", import.meta.url));
    const dist = JSON.stringify(new URL("../dist/index.js", import.meta.url).href);
    writeFileSync(
      file,
      snippet.replace('from "relay-client"', `from ${dist}`).replace("http://127.0.0.1:7433", server.url).replace('"secret"', JSON.stringify(server.token)),
    );
    const out = await new Promise((ok, fail) =>
      execFile(process.execPath, [file], (e, stdout, stderr) => (e ? fail(new Error(`${e.message}\n${stderr}`)) : ok(stdout))),
    );
    // Both acked by the second call (its lease finds nothing more), and
    // the heartbeat of no jobs answers none.
    assert.deepEqual(out.trimEnd().split("\n").map((l) => l.split(" ").slice(0, 2).join(" ")), ids.map((id) => `${id} SUCCEEDED`));
    for (const id of ids) assert.equal((await client.get(id)).state, "SUCCEEDED");
    client.close();
  } finally {
    await server.stop();
  }
});
