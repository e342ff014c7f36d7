// `npm install <repo>/clients/typescript` links this folder and runs
// `prepare` in it, but does not install its devDependencies: from a clean
// checkout there is no `tsc` to build dist/ with. Install the pinned ones
// (package-lock.json) first when they are missing, then build.
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
if (!existsSync(tsc)) {
  // --ignore-scripts: not this prepare again from inside it.
  execFileSync("npm", ["ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: root, stdio: "inherit" });
}
execFileSync(process.execPath, [tsc, "-p", root], { stdio: "inherit" });
