/**
 * The processes of a benchmark run: the built API and dispatcher (the Node flags of their start
 * scripts, as in production), the bare Express route, the load generator and the floor. A
 * service that exits before the end fails the run at once, and every child is stopped when the
 * bench process ends, however it ends.
 */
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { startNode, startProcess, waitForHttp, type StartedProcess } from "@mailhooks/processes";
import type { LoadRequest, LoadResult } from "./load.js";

const t0 = Date.now();
/** A progress line on stderr, with the seconds since the bench started. */
export const log = (line: string) => console.error(`bench [${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]: ${line}`);

/** The long-lived children (@mailhooks/processes, SIGKILLed however the bench ends). */
const children = new Set<StartedProcess>();
let stopping = false;
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => fail(`interrupted (${signal})`));

/** Fails the run: exits 1, which SIGKILLs every child. */
export function fail(message: string): never {
  console.error(`bench: FAILED: ${message}`);
  stopping = true;
  process.exit(1);
}

/** The Node flags of `npm run <script>` (package.json), e.g. the heap limits of start:api. */
export function nodeFlagsOf(root: string, script: string): string[] {
  const scripts = JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")).scripts as Record<string, string>;
  return scripts[script].split(" ").filter((arg) => arg.startsWith("--"));
}

/** BENCH_PROFILE=1 writes V8 CPU profiles of the services to .tmp/profiles, named after their kind. */
export function profileFlags(root: string, kind: string): string[] {
  if (!process.env.BENCH_PROFILE) return [];
  const at = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*/, "");
  return ["--cpu-prof", `--cpu-prof-dir=${path.join(root, ".tmp/profiles")}`, `--cpu-prof-name=${kind}.${at}.${process.pid}.cpuprofile`];
}

/**
 * Starts a long-lived Node child, `args` being node's (flags, then the entry); its output is the
 * bench's own, and its unexpected exit fails the run.
 */
export function startChild(name: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; ipc?: boolean }): StartedProcess {
  const child = startProcess(name, process.execPath, args, {
    cwd: options.cwd,
    env: options.env,
    ipc: options.ipc,
    output: "inherit",
    killWithParent: true,
    onUnexpectedExit: (exit) => {
      if (!stopping)
        fail(exit.error ? `${name} could not start (${exit.error.message})` : `${name} exited unexpectedly (${exit.code ?? exit.signal})`);
    },
  });
  children.add(child);
  void child.exited.then(() => children.delete(child));
  return child;
}

/**
 * Stops one child before the end of the run: SIGTERM (a dispatcher lets its attempts in flight
 * finish), then SIGKILL if it has not exited within `graceMs`. Resolves once it has exited.
 */
export async function stopChild(child: StartedProcess, graceMs = 15_000): Promise<void> {
  await child.stop(graceMs);
}

/** Stops the long-lived children with SIGTERM and waits for them (CPU profiles are written on exit). */
export async function stopChildren(): Promise<void> {
  stopping = true;
  await Promise.all([...children].map((child) => child.stop(Infinity)));
}

/** Pauses / resumes a process (SIGSTOP / SIGCONT). */
export const pause = (p: StartedProcess) => p.child.kill("SIGSTOP");
export const resume = (p: StartedProcess) => p.child.kill("SIGCONT");

/** Peak resident set size (VmHWM) since start or the last resetPeakRss, in MB. */
export async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024);
}

/** Resets VmHWM to the current RSS (Linux: `5` to /proc/PID/clear_refs), so that a phase's peak is its own. */
export async function resetPeakRss(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/clear_refs`, "5").catch(() => undefined);
}

/** Waits until `url` answers 2xx; fails the run after 30 s. */
export async function waitReady(url: string, what: string): Promise<void> {
  await waitForHttp(url, 30_000).catch(() => fail(`${what} not ready at ${url} after 30 s`));
}

/** Runs a TypeScript file (tsx) with IPC, sends it `request` and resolves with its one answer. */
export function forkOnce<TReq, TRes>(root: string, file: string, request: TReq, env: NodeJS.ProcessEnv): Promise<TRes> {
  return new Promise((resolve, reject) => {
    const p = startNode(file, path.join(root, file), { cwd: root, env, ipc: true, output: "inherit", killWithParent: true });
    p.child.once("message", (message) => resolve(message as TRes));
    void p.exited.then(({ code }) => {
      if (code !== 0) reject(new Error(`${file} exited with ${code}`));
    });
    p.child.send(request as object);
  });
}

/** The load generator: one process for the whole run, one load at a time. */
export interface LoadGenerator {
  run: (request: LoadRequest) => Promise<LoadResult>;
  close: () => void;
}

export function startLoadGenerator(root: string, env: NodeJS.ProcessEnv): LoadGenerator {
  let closed = false;
  const p = startNode("the load generator", path.join(root, "bench/load.ts"), {
    cwd: root,
    env,
    ipc: true,
    output: "inherit",
    killWithParent: true,
    onUnexpectedExit: ({ code }) => {
      if (!stopping && !closed) fail(`the load generator exited unexpectedly (${code})`);
    },
  });
  const child = p.child;
  let nextId = 0;
  const pending = new Map<number, { resolve: (r: LoadResult) => void; reject: (e: Error) => void }>();
  child.on("message", (message: { id: number; result?: LoadResult; error?: string }) => {
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    if (message.error) waiter?.reject(new Error(message.error));
    else waiter?.resolve(message.result!);
  });
  return {
    run: (request) =>
      new Promise((resolve, reject) => {
        const id = nextId++;
        pending.set(id, { resolve, reject });
        child.send({ id, request });
      }),
    close: () => {
      closed = true;
      child.disconnect();
    },
  };
}
