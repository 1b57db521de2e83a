import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** `npm run demo` as the tests run it: from source, in a child process, its output collected. */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");

/** The sign-in line the demo ends with (its last line). */
export const SIGN_IN_LINE = /^dashboard: {2}(http:\/\/127\.0\.0\.1:\d+\/dashboard\/sign-in\/\S+)$/;

export interface RunningDemo {
  child: ChildProcess;
  /** stdout and stderr so far, interleaved as they came. */
  output: () => string;
  /** The lines of stdout so far. */
  stdoutLines: () => string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts the demo with `args` and `env` over this process's environment. */
export function startDemo(args: string[], env: Record<string, string>): RunningDemo {
  const base: Record<string, string | undefined> = { ...process.env };
  // jest's own flags (--experimental-vm-modules) are not the demo's.
  delete base.NODE_OPTIONS;
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=source", path.join(ROOT, "scripts/demo/main.ts"), ...args], {
    cwd: ROOT,
    env: { ...base, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  let stdout = "";
  child.stdout.on("data", (chunk: Buffer) => {
    output += chunk.toString();
    stdout += chunk.toString();
  });
  child.stderr.on("data", (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
  return { child, output: () => output, stdoutLines: () => stdout.split("\n").filter((line) => line !== ""), exited };
}

/** Runs the demo to its end (SIGTERM after `timeoutMs`, then a rejection). */
export async function runDemo(env: Record<string, string>, timeoutMs: number, args: string[] = []): Promise<{ code: number | null; output: string; stdoutLines: string[] }> {
  const demo = startDemo(args, env);
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    demo.child.kill("SIGTERM");
  }, timeoutMs);
  const { code } = await demo.exited;
  clearTimeout(timer);
  if (timedOut) throw new Error(`the demo did not finish within ${timeoutMs} ms; output:\n${demo.output()}`);
  return { code, output: demo.output(), stdoutLines: demo.stdoutLines() };
}
