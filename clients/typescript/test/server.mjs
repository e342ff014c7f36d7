// A real `relay serve` for the tests: a free loopback port, a token, a
// database in a temporary directory; stopped with SIGTERM after. `kill()`
// is a kill -9; `restart()` starts it again on the same database and port.
import { spawn } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(fileURLToPath(import.meta.url), "../../../..");
export const RELAY = process.env.RELAY_BIN ?? join(repo, "target", "debug", "relay");
export const TOKEN = "ts-test-token";

export function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.once("error", fail);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
  });
}

function spawnRelay(db, port, maxWait = "5s") {
  const proc = spawn(RELAY, ["--db", db, "serve", "--listen", `127.0.0.1:${port}`, "--max-wait", maxWait], {
    env: { ...process.env, RELAY_TOKEN: TOKEN },
    stdio: ["ignore", "ignore", "pipe"],
  });
  proc.stderr.resume();
  return proc;
}

async function waitUp(url, proc) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    try {
      const r = await fetch(url + "/healthz");
      if (r.ok) return;
    } catch {
      // not up yet
    }
    if (proc.exitCode !== null) throw new Error(`relay serve exited with ${proc.exitCode}`);
    if (Date.now() > deadline) throw new Error("relay serve did not answer within 30 s");
    await new Promise((r) => setTimeout(r, 50));
  }
}

function ended(proc, signal) {
  return new Promise((ok) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return ok();
    proc.once("exit", ok);
    proc.kill(signal);
  });
}

export async function startServer(port, { maxWait } = {}) {
  port ??= await freePort();
  const db = join(mkdtempSync(join(tmpdir(), "relay-ts-")), "relay.db");
  const url = `http://127.0.0.1:${port}`;
  let proc = spawnRelay(db, port, maxWait);
  await waitUp(url, proc);
  return {
    url,
    port,
    token: TOKEN,
    stop: () => ended(proc, "SIGTERM"),
    /** kill -9: no shutdown, connections cut, whatever is not committed lost. */
    kill: () => ended(proc, "SIGKILL"),
    /** Starts it again on the same database and port; resolves once it answers. */
    restart: async () => {
      proc = spawnRelay(db, port, maxWait);
      await waitUp(url, proc);
    },
  };
}

export async function waitFor(what, predicate, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
