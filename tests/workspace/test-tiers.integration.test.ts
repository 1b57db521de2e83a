import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { runProcess } from "@mailhooks/processes";
import { ALONE_FILES, isIntegrationTest } from "../../jest.config.js";

/**
 * jest.config.ts as jest reads it: JEST_ALONE_FILES=exclude leaves out exactly the files that must
 * run alone, =only keeps exactly them, in both tiers; so the two runs of scripts/jest-run.mjs
 * (planTiers) cover any selection once.
 */
const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

async function listed(env: Record<string, string | undefined>, project: "unit" | "integration"): Promise<Set<string>> {
  const { stdout } = await runProcess(process.execPath, [require.resolve("jest/bin/jest"), "--listTests", "--selectProjects", project], {
    cwd: root,
    env: { NODE_OPTIONS: "--experimental-vm-modules --no-warnings=ExperimentalWarning", ...env },
    check: true,
    timeoutMs: 120_000,
  });
  return new Set(
    stdout
      .split("\n")
      .filter((line) => line.startsWith("/"))
      .map((line) => path.relative(root, line)),
  );
}

test.each(["unit", "integration"] as const)(
  "the %s tier: =only lists its alone files, =exclude every other file",
  async (project) => {
    const [all, only, excluded] = await Promise.all([
      listed({ JEST_ALONE_FILES: undefined }, project),
      listed({ JEST_ALONE_FILES: "only" }, project),
      listed({ JEST_ALONE_FILES: "exclude" }, project),
    ]);
    const mine = ALONE_FILES.filter((file) => isIntegrationTest(file) === (project === "integration"));
    expect([...only].sort()).toEqual([...mine].sort());
    expect([...excluded].filter((file) => only.has(file))).toEqual([]);
    expect([...excluded, ...only].sort()).toEqual([...all].sort());
  },
  180_000,
);
