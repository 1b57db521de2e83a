// `npm test`: every test, both tiers (jest.config.ts; `npm run test:unit` runs the unit tier
// alone). Prepares what the suite needs before jest starts: the HTTPS receivers' certificate and a
// freshly migrated test database (prepare-tests.ts), dropped again at the end when it is the run's
// own. Extra arguments go to jest, e.g. `npm test -- tests/e2e/retry.test.ts`; the files that must
// run alone run one at a time after the others, whatever the selection (runInTiers). `--help` and
// an option jest does not know are answered before anything is prepared.
import { certDir, jestArguments, prepare, runInTiers } from "./jest-run.mjs";

const USAGE = `Usage: npm test [-- [jest options] [test path patterns]]

Runs the whole test suite with jest: the unit tier and the integration tier
(CONTRIBUTING.md; \`npm run test:unit\` runs the unit tier alone, without servers).
Any run, whole or a subset, is two jest runs: every file but those that must run
alone (jest.config.ts, ALONE_FILES) one worker per core, then those one at a time.
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
  go            on the PATH, optional: without it docs/receivers.md's Go example is not run
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

const status = await runInTiers(args, { TEST_DATABASE_URL: databaseUrl });
if (ownDatabase) prepare(["--drop"], { TEST_DATABASE_URL: databaseUrl });
process.exit(status);

/**
 * Whether `args` ask for the whole suite (no path, project, name or worker option: at most --json,
 * --ci, --outputFile). Only then does a missing browser stop the run (scripts/chromium.ts).
 */
function wholeSuite(args) {
  return args.every((arg, i) => /^--(json|ci|outputFile=.+)$/.test(arg) || arg === "--outputFile" || args[i - 1] === "--outputFile");
}
