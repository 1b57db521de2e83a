import type { Config } from "jest";

/**
 * One jest run for every workspace. Sources are ESM TypeScript, compiled by ts-jest
 * without type checking (`npm run build` type-checks); workspace packages resolve to their
 * sources so that tests never need a build. Run through `npm test` (scripts/test.mjs),
 * which prepares the test database and the receivers' certificate first.
 */
const config: Config = {
  testEnvironment: "node",
  extensionsToTreatAsEsm: [".ts"],
  roots: ["<rootDir>/packages", "<rootDir>/apps", "<rootDir>/tests", "<rootDir>/examples", "<rootDir>/docs"],
  testMatch: ["**/*.test.ts"],
  moduleNameMapper: {
    "^@mailhooks/([a-z-]+)$": "<rootDir>/packages/$1/src/index.ts",
    "^@mailhooks/([a-z-]+)/([a-z-]+)$": "<rootDir>/packages/$1/src/$2.ts",
    "^(\\.{1,2}/.*)\\.js$": "$1",
  },
  transform: {
    "^.+\\.ts$": ["ts-jest", { useESM: true, tsconfig: "<rootDir>/tsconfig.jest.json", diagnostics: false }],
  },
  testTimeout: 60_000,
  // Exit once the results are written. After some full runs Node 20's own teardown spun at 100 %
  // CPU for good in Environment::CleanupHandles (a gdb backtrace of the jest process, with no
  // libuv handle nor request left active), so `npm test` and CI waited forever after printing
  // the results. Every test closes what it opens (no run reports an open handle): ending with
  // process.exit, which skips that teardown, loses nothing.
  forceExit: true,
};

export default config;
