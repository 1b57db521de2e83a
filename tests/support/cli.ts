import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { runProcess, type CompletedProcess } from "@mailhooks/processes";

const require = createRequire(import.meta.url);
const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/**
 * Runs a command of apps/cli from its source as `npm run -s keys -- ARGS` (or `replay`) runs it:
 * tsx with the workspaces' `source` condition, no TTY, from the project root, `env` over this
 * process's environment without jest's NODE_OPTIONS. Resolves when it has ended.
 */
export function runCli(
  command: "keys" | "replay",
  args: string[],
  env: Record<string, string | undefined> = {},
): Promise<CompletedProcess> {
  return runProcess(
    process.execPath,
    [require.resolve("tsx/cli"), "--conditions=source", path.join(root, `apps/cli/src/${command}.ts`), ...args],
    {
      cwd: root,
      env: { NODE_OPTIONS: undefined, ...env },
    },
  );
}
