import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";
import path from "node:path";
import type { StartedService } from "./embedded-postgres.js";
import { freePort, stopProcess } from "./processes.js";

/**
 * A Redis for the demo when none answers at REDIS_URL (CONTRACT.md section 9): `redis-server`
 * from PATH, on a free loopback port, keeping nothing on disk, a child of the demo.
 */

/** The first executable `name` in `searchPath` (a PATH value), or null. */
export function findOnPath(name: string, searchPath = process.env.PATH ?? ""): string | null {
  for (const dir of searchPath.split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, name);
    try {
      accessSync(candidate, constants.X_OK);
      return candidate;
    } catch {
      // not in this folder
    }
  }
  return null;
}

/** Starts `binary` (a redis-server) and resolves once it accepts connections. */
export async function startRedisServer(binary: string): Promise<StartedService> {
  const port = await freePort();
  const child = spawn(binary, ["--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--daemonize", "no"], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  // A demo that exits without its cleanup (an uncaught error) must not leave it behind.
  const killOnExit = () => child.kill("SIGKILL");
  process.on("exit", killOnExit);

  // Its log is read to the end (a full pipe would block it) and shown only when it fails to start.
  let log = "";
  const ready = new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log = (log + chunk.toString()).slice(-4_000);
      if (log.includes("Ready to accept connections")) resolve();
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("error", reject);
    child.once("exit", (code, signal) => reject(new Error(`redis-server exited (${signal ?? code}): ${log.trim().split("\n").slice(-3).join(" / ")}`)));
  });
  const stop = async () => {
    await stopProcess(child, 5_000);
    process.off("exit", killOnExit);
  };
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([ready, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`redis-server not ready after 10 s: ${log}`)), 10_000)))]);
  } catch (error) {
    await stop();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const version = /version=(\S+?),?\s/.exec(log)?.[1];
  return {
    url: `redis://127.0.0.1:${port}`,
    description: `redis-server${version ? ` ${version}` : ""} on 127.0.0.1:${port} (${binary}, nothing kept on disk)`,
    stop,
  };
}
