// `npm test`: prepares what the suite needs before jest starts, then runs jest.
// - the HTTPS receivers' certificate and a freshly migrated test database (prepare-tests.ts);
// - NODE_EXTRA_CA_CERTS naming that certificate: Node reads it only at start, and the jest
//   process's in-process dispatchers must trust the receivers;
// - jest's ESM mode (ts-jest compiles the ESM TypeScript sources).
// Extra arguments go to jest, e.g. `npm test -- tests/e2e/retry.test.ts`. `--help` and an option
// jest does not know are answered before anything is prepared (CONTRACT.md section 1).
import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { createRequire } from "node:module";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const certDir = path.join(root, ".tmp", "certs");

const USAGE = `Usage: npm test [-- [jest options] [test path patterns]]

Runs the test suite with jest. First it makes the HTTPS receivers' certificate
(.tmp/certs) and creates the test database from prisma/migrations; then it passes
every argument to jest (its options: npx jest --help).

Options:
  -h, --help  show this help and exit

Examples:
  $ npm test
  $ npm test -- tests/e2e/retry.test.ts
  $ npm test -- tests/cli packages/verify -t "unknown option"

Needs:
  PostgreSQL    TEST_DATABASE_URL (default: a database of this run's own,
                postgresql://postgres@127.0.0.1:5432/webhooks_test_<pid>, dropped at
                the end); a database it names is dropped and recreated on every run
  Redis         REDIS_URL (default: redis://127.0.0.1:6379)
  python3       on the PATH (the Python receivers' tests)
  chromium      /usr/bin/chromium (the dashboard's browser tests)
  redis-server  on the PATH, optional: without it the bare-laptop demo's test is skipped
  go            on the PATH, optional: without it the README's Go example is not run
`;

const args = process.argv.slice(2);
const options = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
if (options.includes("-h") || options.includes("--help")) {
  process.stdout.write(USAGE);
  process.exit(0);
}
const unknown = options.some((arg) => arg.startsWith("-")) ? options.find(isUnknownOption(jestOptions())) : undefined;
if (unknown !== undefined) {
  process.stderr.write(`error: unknown option '${unknown}'\n\n${USAGE}`);
  process.exit(2);
}

/** The long names (both spellings) and the one-letter aliases of jest's command-line options. */
function jestOptions() {
  // jest-cli is jest's own dependency: resolved from jest, as jest resolves it.
  const { yargsOptions } = createRequire(require.resolve("jest"))("jest-cli");
  const names = new Set(["help", "version"]);
  const letters = new Set(["h"]);
  const kebab = (name) => name.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  for (const [name, option] of Object.entries(yargsOptions)) {
    names.add(name).add(kebab(name));
    for (const alias of [option.alias ?? []].flat()) (alias.length === 1 ? letters : names).add(alias);
  }
  return { names, letters };
}

/**
 * Whether `arg` is an option jest's command line does not know (it knows `--name`,
 * `--name=value`, `--no-name`, `-x`, `-xy`). jest itself would take `--no-anything` as
 * "anything: false" and run the whole suite.
 */
function isUnknownOption({ names, letters }) {
  return (arg) => {
    if (!arg.startsWith("-") || /^-[0-9]/.test(arg)) return false; // a path, or a negative number
    if (!arg.startsWith("--")) return ![...arg.slice(1).split("=")[0]].every((letter) => letters.has(letter));
    const name = arg.slice(2).split("=")[0];
    return !(names.has(name) || (name.startsWith("no-") && names.has(name.slice(3))));
  };
}

// A database of this run's own unless one is named: two runs on one machine (a developer's and
// a helper's, or CI's) must never drop each other's data.
const ownDatabase = process.env.TEST_DATABASE_URL === undefined;
const databaseUrl = process.env.TEST_DATABASE_URL ?? `postgresql://postgres@127.0.0.1:5432/webhooks_test_${process.pid}`;
const prepare = (...extra) =>
  spawnSync(process.execPath, [require.resolve("tsx/cli"), "--conditions=source", path.join(root, "scripts", "prepare-tests.ts"), ...extra], {
    stdio: "inherit",
    env: { ...process.env, TEST_DATABASE_URL: databaseUrl },
  });
const made = prepare(certDir);
if (made.status !== 0) process.exit(made.status ?? 1);

const env = {
  ...process.env,
  TEST_DATABASE_URL: databaseUrl,
  NODE_OPTIONS: `${process.env.NODE_OPTIONS ?? ""} --experimental-vm-modules --no-warnings=ExperimentalWarning`.trim(),
  NODE_EXTRA_CA_CERTS: path.join(certDir, "localhost.crt"),
  TEST_CERT_DIR: certDir,
};
const jest = require.resolve("jest/bin/jest");
const result = spawnSync(process.execPath, [jest, ...args], { stdio: "inherit", env, cwd: root });
if (ownDatabase) prepare("--drop");
process.exit(result.status ?? 1);
