import { runProcess, startRedisServer, type RedisServer } from "@mailhooks/processes";
import { waitUntil } from "../../support/wait.js";

const run = (command: string, args: string[]) => runProcess(command, args, { check: true });

/**
 * A throwaway Redis Cluster of `primaries` primaries (no replicas) on free loopback ports, made
 * of private redis-servers (@mailhooks/processes) started with `--cluster-enabled yes` and joined
 * by `redis-cli --cluster create`, as an operator would; nothing persists. The system Redis is
 * never touched.
 */
export interface ThrowawayCluster {
  /** REDIS_URL for the service: every node, comma-separated. */
  url: string;
  ports: number[];
  destroy: () => Promise<void>;
}

export async function startThrowawayCluster(primaries = 3): Promise<ThrowawayCluster> {
  const nodes: RedisServer[] = [];
  const destroy = async () => {
    await Promise.all(nodes.map((node) => node.destroy()));
  };
  try {
    for (let i = 0; i < primaries; i++)
      nodes.push(await startRedisServer({ args: ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"] }));
    const ports = nodes.map((node) => node.port);
    await run("redis-cli", ["--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"]);
    await waitFor(async () => {
      for (const port of ports) {
        const info = (await run("redis-cli", ["-p", String(port), "cluster", "info"])).stdout;
        if (!/cluster_state:ok/.test(info)) return false;
      }
      return true;
    });
    return { url: ports.map((p) => `redis://127.0.0.1:${p}`).join(","), ports, destroy };
  } catch (error) {
    await destroy();
    throw error;
  }
}

/** Waits until `check` answers true (an error counts as not yet). */
async function waitFor(check: () => Promise<boolean>, timeoutMs = 15_000): Promise<void> {
  await waitUntil(() => check().catch(() => false), Boolean, timeoutMs, 100);
}
