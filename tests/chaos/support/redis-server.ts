import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { freePort } from "./processes.js";

/**
 * A throwaway `redis-server` on a free loopback port, persisting to an append-only file in a
 * temporary folder, that a test can shut down and start again on the same port (the system
 * Redis is never touched).
 */
export interface ThrowawayRedis {
  url: string;
  port: number;
  /** `redis-cli shutdown` (the AOF is written and synced), then waits for the exit. */
  stop: () => Promise<void>;
  /** Starts it again on the same port and folder; resolves once it accepts connections. */
  start: () => Promise<void>;
  /** SIGSTOP: the server keeps its connections open but answers nothing (a hung Redis). */
  freeze: () => void;
  /** SIGCONT after freeze: it answers again, the commands sent meanwhile first. */
  thaw: () => void;
  /** Kills it (if running) and removes its folder. */
  destroy: () => Promise<void>;
}

export async function startThrowawayRedis(): Promise<ThrowawayRedis> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "chaos-redis-"));
  const port = await freePort();
  let child: ChildProcess | null = null;
  let exited: Promise<void> = Promise.resolve();

  const start = async () => {
    const proc = spawn(
      "redis-server",
      ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--appendonly", "yes", "--save", "", "--daemonize", "no", "--protected-mode", "no"],
      { stdio: ["ignore", "pipe", "pipe"] },
    );
    child = proc;
    exited = new Promise((resolve) => proc.once("exit", () => resolve()));
    let out = "";
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`redis-server did not start within 10 s:\n${out}`)), 10_000);
      const onData = (chunk: Buffer) => {
        out += chunk.toString();
        if (out.includes("Ready to accept connections")) {
          clearTimeout(timer);
          resolve();
        }
      };
      proc.stdout.on("data", onData);
      proc.stderr.on("data", onData);
      proc.once("exit", (code) => {
        clearTimeout(timer);
        reject(new Error(`redis-server exited with ${code}:\n${out}`));
      });
    });
  };

  const stop = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    // The connection closes as the server exits: redis-cli's own status does not matter.
    await new Promise<void>((resolve) => execFile("redis-cli", ["-p", String(port), "shutdown"], () => resolve()));
    await exited;
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    stop,
    start,
    freeze: () => void child?.kill("SIGSTOP"),
    thaw: () => void child?.kill("SIGCONT"),
    destroy: async () => {
      child?.kill("SIGCONT");
      if (child && child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL");
        await exited;
      }
      await rm(dir, { recursive: true, force: true });
    },
  };
}
