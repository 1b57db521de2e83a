/**
 * The processes of a benchmark run: the built API and dispatcher (the Node flags of their start
 * scripts, as in production), the bare Express route, the load generator and the floor. A
 * service that exits before the end fails the run at once, and every child is stopped when the
 * bench process ends, however it ends.
 */
import { fork, spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import type { LoadRequest, LoadResult } from "./load.js";

const t0 = Date.now();
/** A progress line on stderr, with the seconds since the bench started. */
export const log = (line: string) => console.error(`bench [${((Date.now() - t0) / 1000).toFixed(0).padStart(4)} s]: ${line}`);

const children = new Set<ChildProcess>();
let stopping = false;
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});
for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => fail(`interrupted (${signal})`));

/** Fails the run: stops every child and exits 1. */
export function fail(message: string): never {
  console.error(`bench: FAILED: ${message}`);
  stopping = true;
  for (const child of children) child.kill("SIGKILL");
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

/** Starts a long-lived Node child; its unexpected exit fails the run. */
export function startChild(name: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; ipc?: boolean }): ChildProcess {
  return startProgram(name, process.execPath, args, options);
}

/** Children that stopChild is stopping: their exit is expected, not a failure. */
const stoppedOnPurpose = new WeakSet<ChildProcess>();

/** Starts a long-lived child running `command` (e.g. redis-server); its unexpected exit fails the run. */
export function startProgram(name: string, command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv; ipc?: boolean }): ChildProcess {
  const child = spawn(command, args, { cwd: options.cwd, env: options.env, stdio: ["ignore", "inherit", "inherit", ...(options.ipc ? (["ipc"] as const) : [])] });
  children.add(child);
  child.on("error", (error) => {
    if (!stopping && !stoppedOnPurpose.has(child)) fail(`${name} could not start (${error.message})`);
  });
  child.on("exit", (code, signal) => {
    children.delete(child);
    if (!stopping && !stoppedOnPurpose.has(child)) fail(`${name} exited unexpectedly (${code ?? signal})`);
  });
  return child;
}

/**
 * Stops one child before the end of the run: SIGTERM (a dispatcher lets its attempts in flight
 * finish), then SIGKILL if it has not exited within `graceMs`. Resolves once it has exited.
 */
export async function stopChild(child: ChildProcess, graceMs = 15_000): Promise<void> {
  stoppedOnPurpose.add(child);
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  child.kill("SIGCONT");
  child.kill("SIGTERM");
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
  await exited;
  clearTimeout(timer);
}

/** Stops the long-lived children with SIGTERM and waits for them (CPU profiles are written on exit). */
export async function stopChildren(): Promise<void> {
  stopping = true;
  await Promise.all(
    [...children].map(
      (child) =>
        new Promise<void>((resolve) => {
          child.once("exit", () => resolve());
          child.kill("SIGCONT");
          child.kill("SIGTERM");
        }),
    ),
  );
}

/** Pauses / resumes a process (SIGSTOP / SIGCONT). */
export const pause = (child: ChildProcess) => child.kill("SIGSTOP");
export const resume = (child: ChildProcess) => child.kill("SIGCONT");

/** Peak resident set size (VmHWM) since start or the last resetPeakRss, in MB. */
export async function peakRssMb(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Math.round(Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? NaN) / 1024);
}

/** Resets VmHWM to the current RSS (Linux: `5` to /proc/PID/clear_refs), so that a phase's peak is its own. */
export async function resetPeakRss(pid: number): Promise<void> {
  await writeFile(`/proc/${pid}/clear_refs`, "5").catch(() => undefined);
}

export async function waitReady(url: string, what: string): Promise<void> {
  for (let i = 0; i < 300; i++) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  fail(`${what} not ready at ${url} after 30 s`);
}

/** Forks a TypeScript file (tsx), sends it `request` and resolves with its one answer. */
export function forkOnce<TReq, TRes>(root: string, file: string, request: TReq, env: NodeJS.ProcessEnv): Promise<TRes> {
  return new Promise((resolve, reject) => {
    const child = fork(path.join(root, file), [], { cwd: root, execArgv: ["--conditions=source", "--import", "tsx"], env });
    children.add(child);
    child.once("message", (message) => resolve(message as TRes));
    child.once("exit", (code) => {
      children.delete(child);
      if (code !== 0) reject(new Error(`${file} exited with ${code}`));
    });
    child.send(request as object);
  });
}

/** The load generator: one process for the whole run, one load at a time. */
export interface LoadGenerator {
  run: (request: LoadRequest) => Promise<LoadResult>;
  close: () => void;
}

export function startLoadGenerator(root: string, env: NodeJS.ProcessEnv): LoadGenerator {
  const child = fork(path.join(root, "bench/load.ts"), [], { cwd: root, execArgv: ["--conditions=source", "--import", "tsx"], env });
  children.add(child);
  child.on("exit", (code) => {
    children.delete(child);
    if (!stopping) fail(`the load generator exited unexpectedly (${code})`);
  });
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
      children.delete(child);
      child.disconnect();
    },
  };
}
