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
 * Test files that must run alone on the machine (CONTRIBUTING.md, "Tests in two tiers"), of either
 * tier: those that hold the code to a time or a memory bound (an event's latency beside hanging
 * receivers, rate_limit spacing, retry and deadline timing, takeover after a kill, a shutdown's
 * length, a parse's time, a process's memory), and those whose effects or measures are the whole
 * database's (the retention purge drops and locks the shared payload partitions; PostgreSQL's
 * index statistics and the key notifications every stack hears count another file's work too; a
 * short LISTEN_IDLE_HOURS disables every idle listen webhook of the database, another file's too).
 * `npm test` and `npm run test:unit` (scripts/jest-run.mjs, runInTiers) run every other file of
 * the run first, one worker per core, then these one at a time, whichever subset is asked for.
 * JEST_ALONE_FILES=exclude leaves them out, =only runs just them.
 * tests/workspace/alone-files.test.ts fails when a file asserts a duration and is not here.
 */
export const ALONE_FILES = [
  "tests/e2e/auth-limits.test.ts",
  "tests/e2e/delivery-core.test.ts",
  "tests/e2e/fairness.test.ts",
  "tests/e2e/hostile-input.test.ts",
  "tests/e2e/listen-wait.test.ts",
  "tests/e2e/listen.test.ts",
  "tests/e2e/malformed-clients.test.ts",
  "tests/e2e/rate-limit.test.ts",
  "tests/e2e/replay.test.ts",
  "tests/e2e/retention-locks.test.ts",
  "tests/e2e/retention.test.ts",
  "tests/e2e/retry.test.ts",
  "tests/e2e/webhooks.test.ts",
  "tests/chaos/crash-loop.test.ts",
  "tests/chaos/hostile-receivers.test.ts",
  "tests/chaos/kill-dispatcher.test.ts",
  "tests/chaos/kill-under-load.test.ts",
  "tests/chaos/lost-work.test.ts",
  "tests/chaos/raw-message-memory.test.ts",
  "tests/chaos/redis-down-new-webhook.test.ts",
  "tests/chaos/redis-flush.test.ts",
  "tests/chaos/raw-message-shapes.test.ts",
  "tests/chaos/redis-restart.test.ts",
  "tests/chaos/relay-timeouts.test.ts",
  "tests/chaos/scheduler-crash.test.ts",
  "tests/chaos/shutdown.test.ts",
  "tests/chaos/slow-clients.test.ts",
  "tests/dashboard/limits.test.ts",
  "tests/dashboard/listen.test.ts",
  "packages/processes/src/processes.integration.test.ts",
  "apps/dispatcher/src/delivery/http-client.test.ts",
  "apps/dispatcher/src/delivery/send.test.ts",
  "packages/events/src/addresses.test.ts",
];

/** Whether `file` (relative to the root) is of the integration tier: under a stack folder, or named `*.integration.test.ts`. */
export function isIntegrationTest(file: string): boolean {
  return STACK_FOLDERS.some((folder) => file.startsWith(`tests/${folder}/`)) || file.endsWith(INTEGRATION_SUFFIX);
}

const alone = process.env.JEST_ALONE_FILES;
const alonePatterns = ALONE_FILES.map((file) => `<rootDir>/${file.replace(/\./g, "\\.")}$`);
/** The alone files of one tier, as `testMatch` globs (JEST_ALONE_FILES=only). */
const aloneOf = (integration: boolean) =>
  ALONE_FILES.filter((file) => isIntegrationTest(file) === integration).map((file) => `<rootDir>/${file}`);

const shared: Config = {
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  roots: ["<rootDir>/packages", "<rootDir>/apps", "<rootDir>/tests", "<rootDir>/examples", "<rootDir>/docs", "<rootDir>/bench"],
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
      testMatch: alone === "only" ? aloneOf(false) : ["**/*.test.ts"],
      testPathIgnorePatterns: [
        "/node_modules/",
        `<rootDir>/tests/(${STACK_FOLDERS.join("|")})/`,
        `${INTEGRATION_SUFFIX.replace(/\./g, "\\.")}$`,
        ...(alone === "exclude" ? alonePatterns : []),
      ],
    },
    {
      ...shared,
      displayName: "integration",
      testMatch:
        alone === "only" ? aloneOf(true) : [`<rootDir>/tests/{${STACK_FOLDERS.join(",")}}/**/*.test.ts`, `**/*${INTEGRATION_SUFFIX}`],
      testPathIgnorePatterns: ["/node_modules/", ...(alone === "exclude" ? alonePatterns : [])],
    },
  ],
  // A global option: jest ignores it in a project's configuration.
  testTimeout: 60_000,
  // Run the test files in worker processes, each started afresh once its heap passes this after a
  // file: a process that runs many ESM test files keeps what each of them left behind (vm
  // modules), and its garbage collection then slows every later file.
  workerIdleMemoryLimit: "768MB",
  // Exit once the results are written: Node 20's own teardown can spin at full CPU for good after
  // a run that left no handle open (in Environment::CleanupHandles), which would leave `npm test`
  // and CI waiting. Every test closes what it opens, so ending with process.exit loses nothing.
  forceExit: true,
};

export default config;
