import getPort from "get-port";
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Queue } from "bullmq";
import { createRedisConnection, QUEUE_NAMES } from "@mailhooks/queue";
import { testCertDir, testDatabaseUrl, testRedisUrl } from "../../support/env.js";

/**
 * The service's processes started from source (tsx), as real OS processes that a test can
 * SIGKILL or SIGTERM, the way an operator or an orchestrator would. Each one gets the test
 * database, certificate trust for the reference receivers, no metrics port and quiet logs;
 * the rest of its configuration comes from the environment, as in production.
 */

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");

export interface ServiceProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** Resolves once the process has exited. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  /** Everything it printed so far (stdout and stderr). */
  output: () => string;
  running: () => boolean;
}

const started = new Set<ServiceProcess>();

/** Environment every spawned service gets (before the test's own overrides). */
export function serviceEnv(overrides: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    METRICS_PORT: "0",
    ALLOW_PRIVATE_TARGETS: "true",
    NODE_EXTRA_CA_CERTS: path.join(testCertDir(), "localhost.crt"),
    LOG_LEVEL: "warn",
    LOG_FORMAT: "json",
    // The sweeper scans the whole database: in a test database shared by test files running in
    // parallel (each with its own queue prefix), a quick sweeper would queue other files'
    // destinations into this prefix. Tests that exercise the sweeper set these explicitly.
    SWEEP_INTERVAL_MS: "600000",
    SWEEP_AFTER_MS: "600000",
    ...overrides,
  };
}

/** Starts `entry` (a TypeScript file under ROOT) from source with tsx's loader, as one OS process. */
export function startService(name: string, entry: string, env: Record<string, string>): ServiceProcess {
  const baseEnv: Record<string, string | undefined> = { ...process.env };
  // jest's own flags (--experimental-vm-modules) are not the service's.
  delete baseEnv.NODE_OPTIONS;
  // `node --import tsx`, not the tsx CLI: the CLI runs the program in a child process of its
  // own, so a signal sent to it would not reach the service.
  const child = spawn(process.execPath, ["--import", "tsx", "--conditions=source", path.join(ROOT, entry)], {
    cwd: ROOT,
    env: { ...baseEnv, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const collect = (chunk: Buffer) => {
    const text = chunk.toString();
    out += text;
    // CHAOS_LOGS=1 shows the services' own logs while the test runs.
    if (process.env.CHAOS_LOGS) process.stderr.write(text.split("\n").filter(Boolean).map((l) => `  [${name}] ${l}\n`).join(""));
  };
  child.stdout!.on("data", collect);
  child.stderr!.on("data", collect);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    child.once("exit", (code, signal) => resolve({ code, signal, at: Date.now() })),
  );
  const handle: ServiceProcess = {
    name,
    child,
    pid: child.pid!,
    exited,
    output: () => out,
    running: () => child.exitCode === null && child.signalCode === null,
  };
  started.add(handle);
  void exited.then(() => started.delete(handle));
  return handle;
}

/** A dispatcher process (apps/dispatcher/src/main.ts). */
export function startDispatcher(name: string, env: Record<string, string>): ServiceProcess {
  return startService(name, "apps/dispatcher/src/main.ts", serviceEnv(env));
}

/** An API process (apps/api/src/main.ts); `PORT` must be given. */
export function startApiProcess(name: string, env: Record<string, string> & { PORT: string }): ServiceProcess {
  return startService(name, "apps/api/src/main.ts", serviceEnv(env));
}

/** SIGKILLs every process started by this module that is still running (afterAll). */
export async function killAll(): Promise<void> {
  const running = [...started];
  for (const p of running) if (p.running()) p.child.kill("SIGKILL");
  await Promise.all(running.map((p) => p.exited));
}

/** Waits for `p` to exit, failing (with its output) after `timeoutMs`. */
export async function waitForExit(p: ServiceProcess, timeoutMs: number): Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${p.name} did not exit within ${timeoutMs} ms; output:\n${p.output()}`)), timeoutMs);
  });
  try {
    return await Promise.race([p.exited, timeout]);
  } finally {
    clearTimeout(timer);
  }
}


/** `testDatabaseUrl()` with another host port (e.g. a proxy's), same database and user. */
export function databaseUrlVia(port: number, host = "127.0.0.1"): string {
  const url = new URL(testDatabaseUrl());
  url.hostname = host;
  url.port = String(port);
  return url.toString();
}

/** Waits until `p` has printed `pattern` (e.g. a log line at LOG_LEVEL=info). */
export async function waitForOutput(p: ServiceProcess, pattern: string | RegExp, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const found = () => (typeof pattern === "string" ? p.output().includes(pattern) : pattern.test(p.output()));
  while (!found()) {
    if (!p.running()) throw new Error(`${p.name} exited before printing ${pattern}; output:\n${p.output()}`);
    if (Date.now() > deadline) throw new Error(`${p.name} did not print ${pattern} within ${timeoutMs} ms; output:\n${p.output()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
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

/** A free TCP port on loopback (get-port). */
export const freePort = (): Promise<number> => getPort({ host: "127.0.0.1" });
