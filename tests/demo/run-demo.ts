import path from "node:path";
import { fileURLToPath } from "node:url";
import { startNode, type StartedProcess } from "@mailhooks/processes";

/** `npm run demo` as the tests run it: from source, in a child process, its output collected. */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The sign-in line the demo ends with (its last line). */
export const SIGN_IN_LINE = /^dashboard: {2}(http:\/\/127\.0\.0\.1:\d+\/dashboard\/sign-in\/\S+)$/;

export interface RunningDemo {
  child: StartedProcess["child"];
  /** stdout and stderr so far, interleaved as they came. */
  output: () => string;
  /** The lines of stdout so far. */
  stdoutLines: () => string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM, then SIGKILL after `graceMs` (StartedProcess's stop). */
  stop: StartedProcess["stop"];
}

/** Starts the demo with `args` and `env` over this process's environment. */
export function startDemo(args: string[], env: Record<string, string>): RunningDemo {
  // jest's own flags (--experimental-vm-modules) are not the demo's.
  const demo = startNode("demo", path.join(ROOT, "scripts/demo/main.ts"), { cwd: ROOT, args, env: { NODE_OPTIONS: undefined, ...env } });
  return {
    child: demo.child,
    output: demo.output,
    stdoutLines: () =>
      demo
        .stdout()
        .split("\n")
        .filter((line) => line !== ""),
    exited: demo.exited,
    stop: demo.stop,
  };
}

/** Runs the demo to its end (SIGTERM after `timeoutMs`, then a rejection). */
export async function runDemo(
  env: Record<string, string>,
  timeoutMs: number,
  args: string[] = [],
): Promise<{ code: number | null; output: string; stdoutLines: string[] }> {
  const demo = startDemo(args, env);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    // No SIGKILL: on SIGTERM the demo stops what it started, however long that takes.
    void demo.stop(Infinity);
  }, timeoutMs);
  const { code } = await demo.exited;
  clearTimeout(timer);
  if (timedOut) throw new Error(`the demo did not finish within ${timeoutMs} ms; output:\n${demo.output()}`);
  return { code, output: demo.output(), stdoutLines: demo.stdoutLines() };
}
