import { readFile } from "node:fs/promises";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";
import { runProcess, startNode, type StartedProcess } from "@mailhooks/processes";
import { createRedisConnection, QUEUE_NAMES } from "@mailhooks/queue";
import { testCertDir, testDatabaseUrl, testRedisUrl } from "../../support/env.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

/**
 * The service's processes started from source (tsx), as real OS processes that a test can
 * SIGKILL or SIGTERM, the way an operator or an orchestrator would, with @mailhooks/processes
 * (whose waits and freePort the chaos tests take from here too). Each one gets the test
 * database, certificate trust for the reference receivers, no metrics port and quiet logs; the
 * rest of its configuration comes from the environment, as in production.
 */
export { freePort, waitForExit, waitForOutput } from "@mailhooks/processes";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

/** A started service: its output is collected (`output()`), shown as it comes with CHAOS_LOGS=1. */
export type ServiceProcess = StartedProcess;

/** The services this test file started (see killAll). */
const started = new Set<ServiceProcess>();

/** Environment every spawned service gets (before the test's own overrides). */
export function serviceEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    METRICS_PORT: "0",
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    NODE_EXTRA_CA_CERTS: path.join(testCertDir(), "localhost.crt"),
    LOG_LEVEL: "warn",
    LOG_FORMAT: "json",
    ...overrides,
  };
}

/** How a service process is started, beyond its environment. */
export interface StartOptions {
  /** Node's own flags, before the loader, e.g. `--max-old-space-size=128` as in `npm run start:dispatcher`. */
  nodeFlags?: string[];
}

/**
 * Starts `entry` (a file under ROOT) as one OS process: a TypeScript source with tsx's loader, a
 * built `.js` file (see buildDispatcher) with plain node, as `npm run start:*` runs it.
 */
export function startService(name: string, entry: string, env: Record<string, string>, options: StartOptions = {}): ServiceProcess {
  const service = startNode(name, path.join(ROOT, entry), {
    cwd: ROOT,
    // jest's own flags (--experimental-vm-modules) are not the service's.
    env: { NODE_OPTIONS: undefined, ...env },
    nodeFlags: options.nodeFlags,
    // CHAOS_LOGS=1 shows the services' own logs while the test runs.
    output: process.env.CHAOS_LOGS ? "prefix" : "collect",
  });
  started.add(service);
  void service.exited.then(() => started.delete(service));
  return service;
}

/**
 * SIGKILLs every service this test file started that still runs (afterAll), never a private
 * redis-server (its destroy() ends it); resolves once they have exited.
 */
export async function killAll(): Promise<void> {
  const running = [...started];
  for (const p of running) if (p.running()) p.child.kill("SIGKILL");
  await Promise.all(running.map((p) => p.exited));
}

/** A dispatcher process (apps/dispatcher/src/main.ts). */
export function startDispatcher(name: string, env: Record<string, string>): ServiceProcess {
  return startService(name, "apps/dispatcher/src/main.ts", serviceEnv(env));
}

/** The Node flags of `npm run start:dispatcher` (package.json): a small young generation and heap. */
export const DISPATCHER_NODE_FLAGS = ["--max-semi-space-size=4", "--max-old-space-size=128"];

/**
 * Compiles the dispatcher and the packages it uses (`tsc -b apps/dispatcher`, incremental: about
 * a second when nothing changed, up to a minute from nothing), for tests that measure the
 * process production runs: tsx's loader thread alone adds about 35 MB of RSS.
 * @throws Error with tsc's output when the build fails.
 */
export function buildDispatcher(): Promise<void> {
  return buildWorkspace("apps/dispatcher");
}

/**
 * Compiles `workspace` (e.g. "apps/api") and the packages it uses with `tsc -b` (incremental).
 * @throws Error with tsc's output when the build fails.
 */
export async function buildWorkspace(workspace: string): Promise<void> {
  const tsc = createRequire(import.meta.url).resolve("typescript/bin/tsc");
  const built = await runProcess(process.execPath, [tsc, "-b", workspace], { cwd: ROOT });
  if (built.code !== 0) throw new Error(`tsc -b ${workspace} failed:\n${built.stdout}${built.stderr}`);
}

/** A dispatcher process from its build (apps/dispatcher/dist/main.js), as `npm run start:dispatcher` starts it. */
export function startBuiltDispatcher(name: string, env: Record<string, string>): ServiceProcess {
  return startService(name, "apps/dispatcher/dist/main.js", serviceEnv(env), { nodeFlags: DISPATCHER_NODE_FLAGS });
}

/**
 * Memory of a running process from /proc/<pid>/status, in bytes: `rss` now (VmRSS) and `peak`
 * (VmHWM, the most it has had resident since it started). Linux only.
 */
export async function processMemory(pid: number): Promise<{ rss: number; peak: number }> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kib = (field: string) => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB$`, "m").exec(status);
    if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
    return Number(match[1]) * 1024;
  };
  return { rss: kib("VmRSS"), peak: kib("VmHWM") };
}

/** An API process (apps/api/src/main.ts); `PORT` must be given. */
export function startApiProcess(name: string, env: Record<string, string> & { PORT: string }): ServiceProcess {
  return startService(name, "apps/api/src/main.ts", serviceEnv(env));
}

/** `testDatabaseUrl()` with another host port (e.g. a proxy's), same database and user. */
export function databaseUrlVia(port: number, host = "127.0.0.1"): string {
  const url = new URL(testDatabaseUrl());
  url.hostname = host;
  url.port = String(port);
  return url.toString();
}

/**
 * Removes the maintenance queue (job schedulers included) that spawned dispatchers created under
 * `prefix`; call after they are stopped. The stack's close() only removes the deliveries queue.
 */
export async function removeMaintenanceQueue(prefix: string, redisUrl = testRedisUrl()): Promise<void> {
  const connection = createRedisConnection(redisUrl, "worker");
  const queue = new Queue(QUEUE_NAMES.maintenance, { connection, prefix });
  try {
    await queue.obliterate({ force: true });
  } finally {
    await queue.close();
    await connection.quit().catch(() => connection.disconnect());
  }
}

/**
 * The end of a chaos test file: every process it started killed first (nothing writes while the
 * rest goes), the maintenance queue its dispatchers made removed, then `closers` in order (a
 * queue before its Redis connection) and the stack last. Each may be absent: a beforeAll that
 * failed half-way leaves some unset.
 */
export async function endChaosFile(
  stack: { prefix: string; close: () => Promise<void> } | undefined,
  ...closers: (() => Promise<unknown> | undefined)[]
): Promise<void> {
  await killAll();
  if (stack) await removeMaintenanceQueue(stack.prefix);
  for (const close of closers) await close();
  await stack?.close();
}
