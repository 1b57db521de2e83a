import path from "node:path";
import { fileURLToPath } from "node:url";
import { planTiers, splitJestArguments } from "../../scripts/jest-run.mjs";

/**
 * However a subset of the tests is asked for, the files that must run alone (ALONE_FILES of
 * jest.config.ts) run one at a time after the others (scripts/jest-run.mjs, planTiers), as the
 * whole suite runs them: CONTRIBUTING.md documents `npm test -- path`, `-- --selectProjects
 * integration` and `-t`.
 */
const ALONE = ["tests/e2e/retry.test.ts", "packages/events/src/addresses.test.ts"];
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const files = new Set(
  ["tests/e2e/retry.test.ts", "tests/e2e/accept.test.ts", "packages/events/src/addresses.test.ts"].map((f) => path.join(root, f)),
);
const plan = (args: string[]) => planTiers(args, ALONE, { workers: 2, isFile: (file) => files.has(file) });

test("a selection by project, folder or name runs twice: the others in parallel, then the alone files one at a time", () => {
  for (const args of [["--selectProjects", "integration"], ["tests/e2e"], ["-t", "retries"], []]) {
    const { runs, check } = plan(args);
    expect(check).toBe(true);
    expect(runs.map((r) => r.env)).toEqual([{ JEST_ALONE_FILES: "exclude" }, { JEST_ALONE_FILES: "only" }]);
    expect(runs[0].args).toContain("--maxWorkers=2");
    expect(runs[1].args).toContain("--maxWorkers=1");
    for (const run of runs) expect(run.args.slice(0, args.length)).toEqual(args);
  }
  // Read as jest reads them: after --selectProjects every argument up to the next option is a project.
  expect(splitJestArguments(["--selectProjects", "integration", "tests/e2e"])).toEqual({
    options: [["--selectProjects", "integration", "tests/e2e"]],
    paths: [],
  });
  expect(splitJestArguments(["tests/e2e", "-t", "a name", "--ci"])).toEqual({
    options: [["-t", "a name"], ["--ci"]],
    paths: ["tests/e2e"],
  });
});

test("files named exactly are split here: the alone ones run after the others, one at a time", () => {
  const { runs, check } = plan(["tests/e2e/retry.test.ts", "tests/e2e/accept.test.ts", "-t", "x"]);
  expect(check).toBe(false);
  expect(runs.map((r) => r.args)).toEqual([
    ["tests/e2e/accept.test.ts", "-t", "x", "--maxWorkers=2"],
    ["tests/e2e/retry.test.ts", "-t", "x", "--maxWorkers=1"],
  ]);
  expect(plan(["packages/events/src/addresses.test.ts"]).runs.map((r) => r.args)).toEqual([
    ["packages/events/src/addresses.test.ts", "--maxWorkers=1"],
  ]);
});

test("a run already one file at a time, a listing, or JSON on stdout is one run", () => {
  expect(plan(["-i", "tests/e2e"]).runs).toEqual([{ args: ["-i", "tests/e2e"], env: {}, part: undefined }]);
  expect(plan(["--maxWorkers=1"]).runs).toHaveLength(1);
  expect(plan(["--listTests"]).runs).toEqual([{ args: ["--listTests"], env: {}, part: undefined }]);
  expect(plan(["--json"]).runs).toEqual([{ args: ["--json", "--maxWorkers=1"], env: {}, part: undefined }]);
});

test("--outputFile gets both runs' results: each run writes a part", () => {
  const { runs, outputFile } = plan(["--json", "--outputFile", "results.json"]);
  expect(outputFile).toBe("results.json");
  expect(runs.map((r) => r.part)).toEqual([expect.stringMatching(/rest\.json$/), expect.stringMatching(/alone\.json$/)]);
  for (const run of runs) expect(run.args).not.toContain("results.json");
});
