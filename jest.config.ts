import type { Config } from "jest";

/**
 * One jest run for every workspace, in two tiers (CONTRIBUTING.md "Tests in two tiers"):
 *
 * - `unit`: runs in the jest process alone: no PostgreSQL, no Redis, no child process.
 *   `npm run test:unit` runs it with every server address pointing at a closed port.
 * - `integration`: everything else: a whole stack (every file under tests/e2e, tests/chaos and
 *   tests/dashboard), or a file named `*.integration.test.ts` (against PostgreSQL or Redis, or
 *   starting processes: services, compilers, the CLI).
 *
 * Sources are ESM TypeScript, compiled by ts-jest without type checking (`npm run build`
 * type-checks); workspace packages resolve to their sources so that tests never need a build.
 * Run through `npm test` (scripts/test.mjs, both tiers), which prepares the test database and
 * the receivers' certificate first, or `npm run test:unit` (scripts/test-unit.mjs).
 */

/** Folders of tests/ whose every test starts a stack: the integration tier whatever the name. */
export const STACK_FOLDERS = ["e2e", "chaos", "dashboard"];
/** The name of an integration test anywhere else. */
export const INTEGRATION_SUFFIX = ".integration.test.ts";

/**
 * Integration test files that must run alone on the machine. Those that hold the service to time
 * or memory bounds (an event's latency beside hanging receivers, rate_limit spacing, retry and
 * deadline timing, takeover after a kill, a shutdown's length, a dispatcher's RSS), and those
 * whose effects or measures are the whole database's (the retention purge drops and locks the
 * shared payload partitions; PostgreSQL's index statistics and the key notifications every stack
 * hears count another file's work too). The whole suite (`npm test`, scripts/test.mjs) runs every
 * other file first, one worker per core, then these one at a time. JEST_ALONE_FILES=exclude
 * leaves them out, =only runs just them.
 */
export const ALONE_FILES = [
  "tests/e2e/auth-limits.test.ts",
  "tests/e2e/fairness.test.ts",
  "tests/e2e/rate-limit.test.ts",
  "tests/e2e/replay.test.ts",
  "tests/e2e/retention-locks.test.ts",
  "tests/e2e/retention.test.ts",
  "tests/e2e/retry.test.ts",
  "tests/chaos/crash-loop.test.ts",
  "tests/chaos/hostile-receivers.test.ts",
  "tests/chaos/kill-dispatcher.test.ts",
  "tests/chaos/kill-under-load.test.ts",
  "tests/chaos/lost-work.test.ts",
  "tests/chaos/raw-message-memory.test.ts",
  "tests/chaos/raw-message-shapes.test.ts",
  "tests/chaos/redis-restart.test.ts",
  "tests/chaos/relay-commit-lost.test.ts",
  "tests/chaos/scheduler-crash.test.ts",
  "tests/chaos/shutdown.test.ts",
  "tests/chaos/slow-clients.test.ts",
  "tests/dashboard/limits.test.ts",
  "packages/scheduler/src/admission.integration.test.ts",
];
const alone = process.env.JEST_ALONE_FILES;
const alonePatterns = ALONE_FILES.map((file) => `<rootDir>/${file.replace(/\./g, "\\.")}$`);

const shared: Config = {
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  roots: ["<rootDir>/packages", "<rootDir>/apps", "<rootDir>/tests", "<rootDir>/examples", "<rootDir>/docs"],
  moduleNameMapper: {
    "^@mailhooks/([a-z-]+)$": "<rootDir>/packages/$1/src/index.ts",
    "^@mailhooks/([a-z-]+)/([a-z-]+)$": "<rootDir>/packages/$1/src/$2.ts",
    "^(\\.{1,2}/.*)\\.js$": "$1",
  },
  transform: {
    "^.+\\.ts$": ["ts-jest", { useESM: true, tsconfig: "<rootDir>/tsconfig.jest.json", diagnostics: false }],
  },
};

const config: Config = {
  projects: [
    {
      ...shared,
      displayName: "unit",
      testMatch: ["**/*.test.ts"],
      testPathIgnorePatterns: [
        "/node_modules/",
        `<rootDir>/tests/(${STACK_FOLDERS.join("|")})/`,
        `${INTEGRATION_SUFFIX.replace(/\./g, "\\.")}$`,
      ],
    },
    {
      ...shared,
      displayName: "integration",
      testMatch:
        alone === "only"
          ? ALONE_FILES.map((file) => `<rootDir>/${file}`)
          : [`<rootDir>/tests/{${STACK_FOLDERS.join(",")}}/**/*.test.ts`, `**/*${INTEGRATION_SUFFIX}`],
      testPathIgnorePatterns: ["/node_modules/", ...(alone === "exclude" ? alonePatterns : [])],
    },
  ],
  // A global option: jest ignores it in a project's configuration.
  testTimeout: 60_000,
  // Run the test files in a worker process, started afresh once its heap passes this after a
  // file. In band (jest's choice on two cores), the one process kept what every ESM test file
  // left behind (vm modules): its heap grew past 600 MB over the 45 unit files alone, and garbage
  // collection slowed every later file (failure-limiter.test.ts took 17 s as the 112th file of a
  // full run, 0.5 s alone). With this a full run on this machine took 574 s instead of 681 s.
  workerIdleMemoryLimit: "768MB",
  // Exit once the results are written. After some full runs Node 20's own teardown spun at 100 %
  // CPU for good in Environment::CleanupHandles (a gdb backtrace of the jest process, with no
  // libuv handle nor request left active), so `npm test` and CI waited forever after printing
  // the results. Every test closes what it opens (no run reports an open handle): ending with
  // process.exit, which skips that teardown, loses nothing.
  forceExit: true,
};

export default config;
