// Keep-alive connections: reused between calls; a call that fails on a
// reused connection before any answer byte (the server closed it while idle)
// is sent once more on a fresh one; any other failure is `Unavailable`.
// A raw TCP server plays Relay here, to drop connections exactly when told;
// the last test restarts a real `relay serve` under a client.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";
import { Client, Unavailable } from "../dist/index.js";
import { startServer } from "./server.mjs";

const ANSWER = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{"events":[]}';

/** The answer to a request for `path`: a submit's and a batch's, else ANSWER. */
function answerFor(path) {
  const body = { "/v1/jobs": '{"id":1}', "/v1/jobs/batch": '{"ids":[1,2]}' }[path];
  return body === undefined ? ANSWER : `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
}

/**
 * A server that calls `decide(connection, request)` for each request (both
 * numbered from 1) and then answers it ("answer"), cuts the connection
 * without a byte ("drop"), sends half an answer and cuts it ("half"), or
 * never answers ("silent").
 */
async function fakeRelay(decide) {
  const seen = [];
  // Each request's path and Idempotency-Key header (null when none).
  const requests = [];
  let connections = 0;
  const server = createServer((socket) => {
    const connection = ++connections;
    let buffered = "";
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      buffered += chunk;
      // A request's head ends at its blank line (a POST's small body is
      // left before the next head, which the match below skips).
      while (buffered.includes("\r\n\r\n")) {
        const head = buffered.slice(0, buffered.indexOf("\r\n\r\n"));
        buffered = buffered.slice(buffered.indexOf("\r\n\r\n") + 4);
        const path = head.match(/(?:GET|POST|DELETE) (\S+) HTTP\/1\.1/)?.[1];
        requests.push({ path, key: head.match(/^idempotency-key: (.*)$/im)?.[1] ?? null });
        seen.push(connection);
        const what = decide(connection, seen.length);
        if (what === "answer") socket.write(answerFor(path));
        else if (what === "half") socket.end(ANSWER.slice(0, 20));
        else if (what === "drop") socket.resetAndDestroy();
      }
    });
  });
  await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
  const url = `http://127.0.0.1:${server.address().port}`;
  return { url, seen, requests, close: () => new Promise((ok) => server.close(ok)) };
}

test("calls share one kept-alive connection", async () => {
  const fake = await fakeRelay(() => "answer");
  const client = new Client(fake.url);
  for (let i = 0; i < 5; i++) await client.events(1);
  assert.deepEqual(fake.seen, [1, 1, 1, 1, 1]);
  client.close();
  await fake.close();
});

test("a reused connection cut before any answer byte: sent once more on a fresh one", async () => {
  // The second request, the first on a reused connection, is dropped.
  const fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
  const client = new Client(fake.url);
  await client.events(1);
  assert.deepEqual(await client.events(1), []);
  assert.deepEqual(fake.seen, [1, 1, 2], "the retry went on a new connection");
  client.close();
  await fake.close();
});

test("other failures are Unavailable, not sent again", async () => {
  // A fresh connection cut: the server got the request, no retry.
  let fake = await fakeRelay(() => "drop");
  let client = new Client(fake.url);
  await assert.rejects(client.events(1), (e) => e instanceof Unavailable && /cannot reach Relay/.test(e.message));
  assert.deepEqual(fake.seen, [1]);
  client.close();
  await fake.close();

  // A reused connection cut after part of the answer: not a stale connection.
  fake = await fakeRelay((_, request) => (request === 2 ? "half" : "answer"));
  client = new Client(fake.url);
  await client.events(1);
  await assert.rejects(client.events(1), Unavailable);
  assert.deepEqual(fake.seen, [1, 1]);
  client.close();
  await fake.close();

  // Retried once only: the fresh connection is cut too.
  fake = await fakeRelay((_, request) => (request === 1 ? "answer" : "drop"));
  client = new Client(fake.url);
  await client.events(1);
  await assert.rejects(client.events(1), Unavailable);
  assert.deepEqual(fake.seen, [1, 1, 2]);
  client.close();
  await fake.close();

  // No answer in time.
  fake = await fakeRelay(() => "silent");
  client = new Client(fake.url, { timeoutMs: 300 });
  await assert.rejects(client.events(1), (e) => e instanceof Unavailable && /no answer within 300 ms/.test(e.message));
  client.close();
  await fake.close();
});

test("a client outlives a server killed and restarted under it", async () => {
  const server = await startServer();
  try {
    const client = new Client(server.url, { token: server.token, timeoutMs: 5000 });
    const id = await client.submit({ queue: "restart", kind: "k" });
    await server.kill();
    await assert.rejects(client.get(id), Unavailable);
    await server.restart();
    assert.equal((await client.get(id)).state, "READY");
    client.close();
  } finally {
    await server.stop();
  }
});

test("only requests safe to repeat are sent again after a stale connection", async () => {
  // A submit without a unique key may have been processed: Unavailable.
  let fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
  let client = new Client(fake.url);
  await client.events(1);
  await assert.rejects(client.submit({ queue: "q", kind: "k" }), Unavailable);
  assert.deepEqual(fake.seen, [1, 1], "not sent again");
  client.close();
  await fake.close();

  // With a unique key (or an ack, a work call...) it is safe: sent again.
  fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
  client = new Client(fake.url);
  await client.events(1);
  await client.submit({ queue: "q", kind: "k", uniqueKey: "once" });
  assert.deepEqual(fake.seen, [1, 1, 2]);
  client.close();
  await fake.close();
});

test("a submit with an idempotency key is sent again after a stale connection; one without is not", async () => {
  let fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
  let client = new Client(fake.url);
  try {
    await client.events(1);
    assert.deepEqual(await client.submitJob({ queue: "q", kind: "k", idempotencyKey: "order-1" }), { id: 1, existing: false });
    assert.deepEqual(fake.seen, [1, 1, 2], "sent again, on a fresh connection");
  } finally {
    client.close();
    await fake.close();
  }

  // The same without a key (nor a unique key): Unavailable, sent once.
  fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
  client = new Client(fake.url);
  try {
    await client.events(1);
    await assert.rejects(client.submit({ queue: "q", kind: "k" }), Unavailable);
    assert.deepEqual(fake.seen, [1, 1], "not sent again");
  } finally {
    client.close();
    await fake.close();
  }
});

test("a batch is sent again after a stale connection only when every job is keyed", async () => {
  const jobs = [{ queue: "q", kind: "k" }, { queue: "q", kind: "k" }];
  const cases = [
    // [batch, options, sent again]
    [jobs, {}, false],
    [jobs, { idempotencyKey: "b-1" }, true],
    [jobs.map((j, i) => ({ ...j, idempotencyKey: `own-${i}` })), {}, true],
    [[{ ...jobs[0], idempotencyKey: "own" }, jobs[1]], {}, false],
  ];
  for (const [batch, options, again] of cases) {
    const fake = await fakeRelay((_, request) => (request === 2 ? "drop" : "answer"));
    const client = new Client(fake.url);
    try {
      await client.events(1);
      if (again) assert.deepEqual(await client.submitBatch(batch, options), [1, 2]);
      else await assert.rejects(client.submitBatch(batch, options), Unavailable);
      assert.deepEqual(fake.seen, again ? [1, 1, 2] : [1, 1], JSON.stringify([batch, options]));
      // Each send carries the key in its Idempotency-Key header.
      const key = options.idempotencyKey ?? null;
      assert.deepEqual(fake.requests.slice(1).map((r) => [r.path, r.key]), fake.seen.slice(1).map(() => ["/v1/jobs/batch", key]));
    } finally {
      client.close();
      await fake.close();
    }
  }
});

test("a connection idle for over 5 s is not reused", async () => {
  const fake = await fakeRelay(() => "answer");
  const client = new Client(fake.url);
  await client.events(1);
  await client.events(1);
  await new Promise((r) => setTimeout(r, 5500));
  await client.events(1);
  assert.deepEqual(fake.seen, [1, 1, 2]);
  client.close();
  await fake.close();
});
