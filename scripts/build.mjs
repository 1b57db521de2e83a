// `npm run build`: generates the typed API client from the committed openapi.json
// (scripts/generate-api-client.mjs), then compiles every workspace with `tsc -b`, and
// @mailhooks/verify a second time as CommonJS (its package.json exports both builds, so that
// `npm install <clone>/packages/verify` works in CommonJS and ESM projects alike). Its own
// command line answers --help and refuses anything else (docs/operations.md, "Commands"), so that
// `npm run build -- --help` no longer prints tsc's help.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

const USAGE = `Usage: npm run build [-- --help]

Compiles every workspace to JavaScript (each one's dist/): first generates the
typed API client (packages/api-client/src/generated) from the committed
openapi.json, then runs tsc -b on the root tsconfig.json, which rebuilds only
what changed, and builds packages/verify as CommonJS too (dist/cjs beside
dist/esm). \`npm start\` builds first by itself.

Options:
  -h, --help  show this help and exit

Example:
  $ npm run build

Needs: the installed dependencies (npm ci); no database, Redis or network.
`;

const args = process.argv.slice(2);
if (args.includes("-h") || args.includes("--help")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
if (args.length > 0) {
  const error = args[0].startsWith("-") ? `unknown option '${args[0]}'` : `too many arguments: '${args[0]}' (the build takes none)`;
  process.stderr.write(`error: ${error}\n\n${USAGE}`);
  process.exit(2);
}

const generated = spawnSync(process.execPath, [path.join(root, "scripts", "generate-api-client.mjs")], { stdio: "inherit", cwd: root });
if (generated.status !== 0) process.exit(generated.status ?? 1);
const VERIFY_CJS = path.join("packages", "verify", "tsconfig.cjs.json");
const compiled = spawnSync(process.execPath, [require.resolve("typescript/bin/tsc"), "-b", "tsconfig.json", VERIFY_CJS], {
  stdio: "inherit",
  cwd: root,
});
if (compiled.status !== 0) process.exit(compiled.status ?? 1);
// dist/cjs/package.json says "commonjs" inside a "type": "module" package.
const marked = spawnSync(process.execPath, [path.join(root, "packages", "verify", "scripts", "write-cjs-package.mjs")], {
  stdio: "inherit",
  cwd: root,
});
process.exit(marked.status ?? 1);
