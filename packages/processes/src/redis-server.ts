import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { freePort, startProcess, type ProcessExit, type StartedProcess } from "./process.js";

/**
 * A private `redis-server` on a free loopback port and a temporary folder of its own, for a test,
 * the benchmark or the demo: never the system Redis. It can be stopped and started again on the
 * same port and folder, frozen and thawed.
 */
export interface RedisServer {
  /** REDIS_URL for it: `redis://127.0.0.1:<port>`. */
  url: string;
  port: number;
  /** Its folder (removed by destroy). */
  dir: string;
  /** The redis-server run. */
  binary: string;
  /** Its version as its start-up log says it (e.g. "7.0.15"), if it does. */
  version: string | undefined;
  /** Shuts it down (SIGTERM: as SHUTDOWN, the append-only file is written and synced), then waits for the exit. */
  stop: () => Promise<void>;
  /** Starts it again on the same port and folder; resolves once it accepts connections. */
  start: () => Promise<void>;
  /** SIGSTOP: it keeps its connections open but answers nothing (a hung Redis). */
  freeze: () => void;
  /** SIGCONT after freeze: it answers again, the commands sent meanwhile first. */
  thaw: () => void;
  /** Kills it (if running) and removes its folder. */
  destroy: () => Promise<void>;
}

export interface RedisServerOptions {
  /** The program (default: `redis-server` from PATH). */
  binary?: string;
  /**
   * Keeps the data in an append-only file in its folder, so that a stop and a start find it again
   * (default false: nothing is written to disk).
   */
  appendOnly?: boolean;
  /** More arguments, e.g. `["--cluster-enabled", "yes"]`. */
  args?: string[];
  /** Called when it exits without stop() or destroy() having been asked (see StartOptions). */
  onUnexpectedExit?: (exit: ProcessExit) => void;
  /** SIGKILLs it when this process exits (see StartOptions). */
  killWithParent?: boolean;
  /** Time to accept connections after each start, in ms (default 10 s). */
  readyTimeoutMs?: number;
}

/**
 * Starts a private redis-server and resolves once it accepts connections.
 * @throws Error with its log when it exits first or is not ready within `readyTimeoutMs`
 * (e.g. redis-server is not on PATH); nothing is left running then.
 */
export async function startRedisServer(options: RedisServerOptions = {}): Promise<RedisServer> {
  const binary = options.binary ?? "redis-server";
  const dir = await mkdtemp(path.join(os.tmpdir(), "redis-server-"));
  const port = await freePort();
  const args = [
    "--port",
    String(port),
    "--bind",
    "127.0.0.1",
    "--dir",
    dir,
    "--save",
    "",
    "--appendonly",
    options.appendOnly ? "yes" : "no",
    "--daemonize",
    "no",
    "--protected-mode",
    "no",
    ...(options.args ?? []),
  ];
  let current: StartedProcess | null = null;
  let version: string | undefined;

  const start = async () => {
    const p = startProcess(`redis-server :${port}`, binary, args, {
      killWithParent: options.killWithParent,
      onUnexpectedExit: options.onUnexpectedExit,
    });
    current = p;
    const timeoutMs = options.readyTimeoutMs ?? 10_000;
    const deadline = Date.now() + timeoutMs;
    while (!p.output().includes("Ready to accept connections")) {
      if (!p.running() || Date.now() > deadline) {
        const timedOut = p.running();
        const exit = await p.stop(0);
        const why = exit.error
          ? `could not start (${exit.error.message})`
          : timedOut
            ? `was not ready within ${timeoutMs} ms`
            : `exited (${exit.signal ?? exit.code})`;
        throw new Error(`${binary} on port ${port} ${why}:\n${p.output().trim().split("\n").slice(-10).join("\n")}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
    version ??= /version=(\S+?),?\s/.exec(p.output())?.[1];
  };

  try {
    await start();
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    binary,
    get version() {
      return version;
    },
    stop: async () => {
      await current?.stop();
    },
    start,
    freeze: () => void current?.child.kill("SIGSTOP"),
    thaw: () => void current?.child.kill("SIGCONT"),
    destroy: async () => {
      await current?.stop(0);
      await rm(dir, { recursive: true, force: true });
    },
  };
}
