import { spawn, type ChildProcess } from "node:child_process";
import getPort from "get-port";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

/** Starting the service's processes from source (tsx), as separate OS processes. */

const require = createRequire(import.meta.url);
export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");


/** Starts `entry` (a TypeScript file under ROOT) with tsx; its output is prefixed with `name`. */
export function startProcess(name: string, entry: string, env: Record<string, string>): ChildProcess {
  const child = spawn(process.execPath, [require.resolve("tsx/cli"), "--conditions=source", path.join(ROOT, entry)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const prefix = (chunk: Buffer) =>
    chunk
      .toString()
      .split("\n")
      .filter(Boolean)
      .map((line) => `  [${name}] ${line}`)
      .join("\n");
  child.stdout?.on("data", (chunk: Buffer) => console.log(prefix(chunk)));
  child.stderr?.on("data", (chunk: Buffer) => console.error(prefix(chunk)));
  return child;
}

/** SIGTERM, then wait for the exit (SIGKILL after `graceMs`). */
export function stopProcess(child: ChildProcess, graceMs = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill("SIGKILL"), graceMs);
    child.once("exit", () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill("SIGTERM");
  });
}

/**
 * Polls `url` until it answers 200 or `timeoutMs` passes. Generous: tsx compiles the sources at
 * start, which on a busy two-core laptop takes well over 30 s for the API and the dispatcher.
 */
export async function waitForHttp(url: string, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(url)).ok) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not become ready within ${timeoutMs} ms`);
}

/** A free TCP port (get-port). */
export const freePort = (): Promise<number> => getPort({ host: "127.0.0.1" });
