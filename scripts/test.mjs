// `npm test`: every test, both tiers (jest.config.ts; `npm run test:unit` runs the unit tier
// alone). Prepares what the suite needs before jest starts: the HTTPS receivers' certificate and a
// freshly migrated test database (prepare-tests.ts), dropped again at the end when it is the run's
// own. Extra arguments go to jest, e.g. `npm test -- tests/e2e/retry.test.ts`. `--help` and an
// option jest does not know are answered before anything is prepared (CONTRACT.md section 1).
import { certDir, jestArguments, prepare, runJest } from "./jest-run.mjs";

const USAGE = `Usage: npm test [-- [jest options] [test path patterns]]

Runs the whole test suite with jest: the unit tier and the integration tier
(CONTRIBUTING.md; \`npm run test:unit\` runs the unit tier alone, without servers).
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
  chromium      /usr/bin/chromium (the dashboard's browser tests)
  redis-server  on the PATH, optional: without it the bare-laptop demo's test is skipped
  go            on the PATH, optional: without it the README's Go example is not run
`;

const args = jestArguments(USAGE);

// A database of this run's own unless one is named: two runs on one machine (a developer's and
// a helper's, or CI's) must never drop each other's data.
const ownDatabase = process.env.TEST_DATABASE_URL === undefined;
const databaseUrl = process.env.TEST_DATABASE_URL ?? `postgresql://postgres@127.0.0.1:5432/webhooks_test_${process.pid}`;
const made = prepare([certDir], { TEST_DATABASE_URL: databaseUrl });
if (made !== 0) process.exit(made);

const status = runJest(args, { TEST_DATABASE_URL: databaseUrl });
if (ownDatabase) prepare(["--drop"], { TEST_DATABASE_URL: databaseUrl });
process.exit(status);
