import { dispatcherConfigSchema, loadConfig, secretKeysOf } from "@mailhooks/config";
import { getLogger } from "@mailhooks/logger";
import { createRedisConnection } from "@mailhooks/queue";
import { createKeyring, parseKeys } from "@mailhooks/secrets";
import { createHttpClient } from "../../apps/dispatcher/src/delivery/http-client.js";
import { createDispatcherMetrics, type DispatcherMetrics } from "../../apps/dispatcher/src/metrics.js";
import { createDeliveryWorker } from "../../apps/dispatcher/src/worker.js";
import { testDatabaseUrl, testRedisUrl } from "./env.js";
import type { Stack } from "./stack.js";

/**
 * A dispatcher's delivery worker on `stack`'s queue (the stack runs only the relay), configured
 * from `env` by the dispatcher's own schema, with metrics of its own that the test reads.
 */
export function startDeliveryWorker(stack: Stack, env: Record<string, string>): { metrics: DispatcherMetrics; close: () => Promise<void> } {
  const config = loadConfig(dispatcherConfigSchema, { DATABASE_URL: testDatabaseUrl(), REDIS_URL: testRedisUrl(), ALLOW_PRIVATE_TARGETS: "true", ...env });
  const connection = createRedisConnection(config.REDIS_URL, "worker", { cluster: config.REDIS_CLUSTER });
  const { client, agent } = createHttpClient({ timeoutMs: config.DELIVERY_TIMEOUT_MS, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS });
  const metrics = createDispatcherMetrics();
  const worker = createDeliveryWorker(
    {
      pool: stack.pool,
      client,
      allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS,
      retryDelaysMs: config.DELIVERY_RETRY_DELAYS_MS,
      logger: getLogger("dispatcher"),
      metrics,
      keyring: createKeyring(parseKeys(secretKeysOf(config))),
      autoDisableAfterMs: config.WEBHOOK_AUTO_DISABLE_AFTER_HOURS * 3_600_000,
    },
    { connection, prefix: stack.keyPrefix, concurrency: 16 },
  );
  return {
    metrics,
    close: async () => {
      await worker.close();
      agent.destroy();
      await connection.quit().catch(() => undefined);
    },
  };
}
