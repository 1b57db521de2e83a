import { execFile, spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { freePort } from "./processes.js";

const run = promisify(execFile);

/**
 * A throwaway Redis Cluster of `primaries` primaries (no replicas) on free loopback ports, made
 * with `redis-server --cluster-enabled yes` and `redis-cli --cluster create`, as an operator
 * would; nothing persists. The system Redis is never touched.
 */
export interface ThrowawayCluster {
  /** REDIS_URL for the service: every node, comma-separated. */
  url: string;
  ports: number[];
  destroy: () => Promise<void>;
}

export async function startThrowawayCluster(primaries = 3): Promise<ThrowawayCluster> {
  const dir = await mkdtemp(path.join(os.tmpdir(), "chaos-cluster-"));
  const ports: number[] = [];
  for (let i = 0; i < primaries; i++) ports.push(await freePort());
  const children: ChildProcess[] = [];
  const destroy = async () => {
    for (const child of children) if (child.exitCode === null) child.kill("SIGKILL");
    await rm(dir, { recursive: true, force: true });
  };
  try {
    for (const port of ports) {
      const child = spawn(
        "redis-server",
        ["--port", String(port), "--bind", "127.0.0.1", "--dir", dir, "--cluster-enabled", "yes", "--cluster-config-file", `nodes-${port}.conf`,
          "--save", "", "--appendonly", "no", "--protected-mode", "no", "--daemonize", "no"],
        { stdio: "ignore" },
      );
      children.push(child);
    }
    // Every node answers before the cluster is made.
    for (const port of ports) await waitFor(async () => (await run("redis-cli", ["-p", String(port), "ping"])).stdout.trim() === "PONG");
    await run("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"]);
    await waitFor(async () => {
      for (const port of ports) {
        const info = (await run("redis-cli", ["-p", String(port), "cluster", "info"])).stdout;
        if (!/cluster_state:ok/.test(info)) return false;
      }
      return true;
    });
  } catch (error) {
    await destroy();
    throw error;
  }
  return { url: ports.map((p) => `redis://127.0.0.1:${p}`).join(","), ports, destroy };
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await check().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`redis cluster not ready within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
