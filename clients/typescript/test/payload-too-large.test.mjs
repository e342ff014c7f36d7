// A request body over the server's limit is answered `PayloadTooLarge`, not
// `Unavailable`: the server answers 413 after reading the first ~2 MiB and
// closes the connection without reading the rest, so the client's write
// fails (EPIPE or ECONNRESET) around the time the answer comes in.
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { after, before, test } from "node:test";
import { Client, PayloadTooLarge } from "../dist/index.js";
import { startServer } from "./server.mjs";

const MiB = 1 << 20;
const TRIES = 10;

let server, client;
before(async () => {
  server = await startServer();
  client = new Client(server.url, { token: server.token });
});
after(async () => {
  client.close();
  await server.stop();
});

/** What a call threw (its class and message), or "returned". */
async function outcome(call) {
  try {
    await call();
    return "returned";
  } catch (e) {
    return `${e.constructor.name}: ${e.message}`;
  }
}

function tally(outcomes) {
  const counts = {};
  for (const o of outcomes) counts[o] = (counts[o] ?? 0) + 1;
  return JSON.stringify(counts);
}

// 3 MiB: the whole body fits in the sockets' buffers, so its write succeeds,
// and the next call must not go on the connection the server closes after
// its 413. 10 and 40 MiB: the write fails (EPIPE, ECONNRESET) mid-body.
for (const sizeMiB of [3, 10, 40]) {
  test(`a ${sizeMiB} MiB submit is PayloadTooLarge every time, never Unavailable`, async () => {
    const payload = "x".repeat(sizeMiB * MiB);
    const big = [];
    const small = [];
    for (let i = 0; i < TRIES; i++) {
      if (i % 2) client.close(); // every other try on a new connection, the others on a reused one
      // With a unique key the submit is one the client may resend: it must not be.
      const extra = i % 3 === 0 ? { uniqueKey: `u${sizeMiB}-${i}` } : {};
      big.push(await outcome(() => client.submit({ queue: "big", kind: "k", payload, ...extra })));
      // The next call (one that is not resent) works: it does not go on the refused connection.
      small.push(await outcome(() => client.submit({ queue: `small${sizeMiB}`, kind: "k", payload: { i } })));
    }
    const failed = big.filter((o) => !o.startsWith("PayloadTooLarge:"));
    assert.equal(failed.length, 0, `${failed.length}/${TRIES} tries at ${sizeMiB} MiB were not PayloadTooLarge: ${tally(failed)}`);
    const smallFailed = small.filter((o) => o !== "returned");
    assert.equal(smallFailed.length, 0, `${smallFailed.length}/${TRIES} submits after a ${sizeMiB} MiB one failed: ${tally(smallFailed)}`);
    // Nothing of the refused submits was written.
    const stats = await client.stats();
    assert.equal(stats.big, undefined);
    assert.equal(stats[`small${sizeMiB}`].READY, TRIES);
  });
}

test("the 413 keeps its status, code and message", async () => {
  await assert.rejects(client.submit({ queue: "big", kind: "k", payload: "x".repeat(10 * MiB) }), (e) => {
    assert.ok(e instanceof PayloadTooLarge, String(e));
    assert.equal(e.status, 413);
    assert.equal(e.code, "payload_too_large");
    assert.match(e.message, /limit/);
    return true;
  });
});

/**
 * A raw server that answers a GET with 200 and a POST with 413 after
 * reading 64 KiB of its body, then closes without reading the rest (the
 * kernel resets the connection: unread bytes were left).
 */
async function refuser() {
  const body413 = '{"error":{"code":"payload_too_large","message":"the body is over the limit"}}';
  const answer413 = `HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: ${body413.length}\r\n\r\n${body413}`;
  const answer200 = 'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 13\r\n\r\n{"queues":{}}';
  const state = { posts: 0 };
  const srv = createServer((socket) => {
    let buffered = Buffer.alloc(0);
    let inPost = false;
    socket.on("error", () => {});
    socket.on("data", (chunk) => {
      buffered = Buffer.concat([buffered, chunk]);
      for (;;) {
        if (inPost) {
          if (buffered.length < 65536) return;
          socket.pause();
          socket.write(answer413, () => socket.destroy()); // the rest of the body unread
          return;
        }
        const end = buffered.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buffered.subarray(0, end).toString();
        buffered = buffered.subarray(end + 4);
        if (head.startsWith("GET ")) socket.write(answer200);
        else {
          state.posts++;
          inPost = true;
        }
      }
    });
  });
  await new Promise((ok) => srv.listen(0, "127.0.0.1", ok));
  state.url = `http://127.0.0.1:${srv.address().port}`;
  state.close = () => new Promise((ok) => srv.close(ok));
  return state;
}

test("a refused body is not sent again, even when it may be", async () => {
  // A 413 on a reused connection to a submit with a unique key (one the
  // client resends after a connection lost before any answer): it was
  // refused, not lost, so it is sent once.
  const fake = await refuser();
  const c = new Client(fake.url, { token: "t", timeoutMs: 10_000 });
  for (let i = 0; i < 5; i++) {
    await c.stats();
    await assert.rejects(c.submit({ queue: "q", kind: "k", payload: "x".repeat(8 * MiB), uniqueKey: `u${i}` }), PayloadTooLarge);
    assert.equal(fake.posts, i + 1, "sent once");
  }
  assert.deepEqual(await c.stats(), {});
  c.close();
  await fake.close();
});
