// The documented install, `npm install <repo>/clients/typescript`, from a
// clean checkout (no node_modules, no dist/) gives a package that imports
// and works: `prepare` installs the pinned build tools and builds dist/.
// Needs the npm registry (for typescript), as scripts/ts-client does.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { startServer } from "./server.mjs";

const pkg = fileURLToPath(new URL("..", import.meta.url));

function run(cmd, args, options) {
  return new Promise((ok, fail) =>
    execFile(cmd, args, { timeout: 300_000, ...options }, (e, stdout, stderr) =>
      e ? fail(Object.assign(new Error(`${cmd} ${args.join(" ")}: ${e.message}\n${stdout}\n${stderr}`), { output: stdout + stderr })) : ok(stdout),
    ),
  );
}

test("npm install <repo>/clients/typescript from a clean checkout, then import it", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "relay-ts-install-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  // What a clean checkout holds: the sources, without anything built or installed.
  const checkout = join(dir, "repo", "clients", "typescript");
  const built = new Set(["node_modules", "dist"]);
  cpSync(pkg, checkout, { recursive: true, filter: (src) => !built.has(basename(src)) && !src.endsWith(".tmp.mjs") });
  const app = join(dir, "app");
  mkdirSync(app);
  await run("npm", ["install", checkout], { cwd: app });
  const server = await startServer();
  try {
    const script = join(app, "use.mjs");
    writeFileSync(script, `
      import { Client, Worker } from "relay-client";
      const client = new Client(process.argv[2], { token: process.argv[3] });
      const id = await client.submit({ queue: "installed", kind: "k" });
      console.log(typeof Worker, id, (await client.get(id)).state);
    `);
    assert.equal(await run(process.execPath, [script, server.url, server.token], { cwd: app }), "function 1 READY\n");
  } finally {
    await server.stop();
  }
});
