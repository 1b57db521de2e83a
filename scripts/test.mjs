// `npm test`: every test, both tiers (jest.config.ts; `npm run test:unit` runs the unit tier
// alone). Prepares what the suite needs before jest starts: the HTTPS receivers' certificate and a
// freshly migrated test database (prepare-tests.ts), dropped again at the end when it is the run's
// own. Extra arguments go to jest, e.g. `npm test -- tests/e2e/retry.test.ts`. `--help` and an
// option jest does not know are answered before anything is prepared (CONTRACT.md section 1).
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import { certDir, jestArguments, prepare, runJest } from "./jest-run.mjs";

const USAGE = `Usage: npm test [-- [jest options] [test path patterns]]

Runs the whole test suite with jest: the unit tier and the integration tier
(CONTRIBUTING.md; \`npm run test:unit\` runs the unit tier alone, without servers).
The whole suite runs in two jest runs: every file but those that must run alone
(jest.config.ts, ALONE_FILES) one worker per core, then those one at a time.
First it makes the HTTPS receivers' certificate (.tmp/certs) and creates the test
database from prisma/migrations; then it passes every argument to jest (its options:
npx jest --help).

Options:
  -h, --help  show this help and exit

Examples:
  $ npm test
  $ npm test -- tests/e2e/retry.test.ts
  $ npm test -- tests/cli packages/verify -t "unknown option"
  $ npm test -- --selectProjects integration

Needs:
  PostgreSQL    TEST_DATABASE_URL (default: a database of this run's own,
                postgresql://postgres@127.0.0.1:5432/webhooks_test_<pid>, dropped at
                the end); a database it names is dropped and recreated on every run
  Redis         REDIS_URL (default: redis://127.0.0.1:6379)
  python3       on the PATH (the Python receivers' tests)
  Chromium      the browser tests' browser: CHROMIUM_PATH, else chromium (or
                chromium-browser, google-chrome) on the PATH or where packages put it;
                installed with apt-get when missing and run as root on Debian
  redis-server  on the PATH, optional: without it the bare-laptop demo's test is skipped
  go            on the PATH, optional: without it the README's Go example is not run
`;

const args = jestArguments(USAGE);

// A database of this run's own unless one is named: two runs on one machine (a developer's and
// a helper's, or CI's) must never drop each other's data.
const ownDatabase = process.env.TEST_DATABASE_URL === undefined;
const databaseUrl = process.env.TEST_DATABASE_URL ?? `postgresql://postgres@127.0.0.1:5432/webhooks_test_${process.pid}`;
// The browser tests need a Chromium: the whole suite stops before its first test without one
// (scripts/chromium.ts); a subset only warns.
const made = prepare([certDir, `--browser=${wholeSuite(args) ? "required" : "optional"}`], { TEST_DATABASE_URL: databaseUrl });
if (made !== 0) process.exit(made);

const status = wholeSuite(args) ? runWholeSuite(args, databaseUrl) : runJest(args, { TEST_DATABASE_URL: databaseUrl });
if (ownDatabase) prepare(["--drop"], { TEST_DATABASE_URL: databaseUrl });
process.exit(status);

/**
 * Whether `args` ask for the whole suite (no path, project, name or worker option: at most --json,
 * --ci, --outputFile). --json without --outputFile is not split: it prints one JSON document.
 */
function wholeSuite(args) {
  const onlyThese = args.every(
    (arg, i) => /^--(json|ci|outputFile=.+)$/.test(arg) || arg === "--outputFile" || args[i - 1] === "--outputFile",
  );
  return onlyThese && (!args.includes("--json") || args.some((arg) => arg.startsWith("--outputFile")));
}

/**
 * The whole suite in two jest runs (jest.config.ts, ALONE_FILES): every file but those that must
 * run alone with one worker per core (their tests mostly wait on servers and timers: 572 s one at
 * a time on this 2-core machine, 344 s with two workers), then those one at a time. With
 * --outputFile, each run writes a part and the two are merged into the file named (the JSON of
 * `--json`: counts summed, test results of both). Returns the exit status: 0 when both passed.
 */
function runWholeSuite(args, databaseUrl) {
  const named = args.indexOf("--outputFile");
  const outputFile = named >= 0 ? args[named + 1] : args.find((arg) => arg.startsWith("--outputFile="))?.slice("--outputFile=".length);
  const rest = args.filter((arg, i) => !(arg.startsWith("--outputFile") || (named >= 0 && i === named + 1)));
  const parts = outputFile ? [`${outputFile}.rest.json`, `${outputFile}.alone.json`] : [];
  const env = { TEST_DATABASE_URL: databaseUrl };
  const first = runJest([...rest, `--maxWorkers=${os.availableParallelism()}`, ...(outputFile ? [`--outputFile=${parts[0]}`] : [])], {
    ...env,
    JEST_ALONE_FILES: "exclude",
  });
  const second = runJest(
    [...rest, "--selectProjects", "integration", "--maxWorkers=1", ...(outputFile ? [`--outputFile=${parts[1]}`] : [])],
    { ...env, JEST_ALONE_FILES: "only" },
  );
  if (outputFile) writeFileSync(outputFile, `${JSON.stringify(mergeResults(parts.map(readResults)))}\n`);
  return first !== 0 ? first : second;
}

/** A part written by jest --json, or null when the run wrote none (it crashed). */
function readResults(file) {
  if (!existsSync(file)) return null;
  const results = JSON.parse(readFileSync(file, "utf8"));
  rmSync(file);
  return results;
}

/** jest --json results of two runs as one: counts summed, test results concatenated; a missing part fails it. */
function mergeResults([a, b]) {
  const runs = [a, b].filter(Boolean);
  const sum = (key) => runs.reduce((total, r) => total + (r[key] ?? 0), 0);
  const counts = Object.keys(runs[0] ?? {}).filter((key) => key.startsWith("num"));
  return {
    ...Object.fromEntries(counts.map((key) => [key, sum(key)])),
    startTime: Math.min(...runs.map((r) => r.startTime)),
    success: runs.length === 2 && runs.every((r) => r.success),
    testResults: runs.flatMap((r) => r.testResults),
  };
}
