// `npm run test:unit`: the unit tier of jest.config.ts alone, the tests that run in the jest
// process without PostgreSQL, Redis or a child process. It needs no server and prepares no
// database; it points every server address at a closed port, so that a test that does need one
// fails here (it belongs in the integration tier: CONTRIBUTING.md) instead of passing because a
// server happened to run. Extra arguments go to jest, as for `npm test`.
import { certDir, jestArguments, prepare, runInTiers } from "./jest-run.mjs";

const USAGE = `Usage: npm run test:unit [-- [jest options] [test path patterns]]

Runs the unit tier of the test suite with jest (CONTRIBUTING.md): every test that
needs no PostgreSQL, no Redis and no child process, in well under a minute; those
that assert a time or memory bound run one at a time after the others. First
it makes the HTTPS receivers' certificate (.tmp/certs); no database is made. Every
server address (DATABASE_URL, TEST_DATABASE_URL, REDIS_URL) points at a closed port.
Every argument goes to jest (its options: npx jest --help).

Options:
  -h, --help  show this help and exit

Examples:
  $ npm run test:unit
  $ npm run test:unit -- packages/delivery-state
  $ npm run test:unit -- -t "signature"

Needs:
  nothing but the installed packages (npm ci)
`;

/** Nothing listens on port 1 of loopback: a connection is refused at once. */
const NOWHERE = {
  DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none",
  TEST_DATABASE_URL: "postgresql://nobody@127.0.0.1:1/none",
  REDIS_URL: "redis://127.0.0.1:1",
};

const args = jestArguments(USAGE);
const made = prepare([certDir, "--no-database"]);
if (made !== 0) process.exit(made);
// One worker per core (jest keeps one core for itself by default): these tests compute and never
// wait on a server, and the jest process itself is idle while its workers run. The unit files that
// assert a time or memory bound (jest.config.ts, ALONE_FILES) run one at a time after the others.
process.exit(await runInTiers([...args, "--selectProjects", "unit"], NOWHERE));
