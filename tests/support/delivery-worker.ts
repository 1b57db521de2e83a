import { randomUUID } from "node:crypto";
import type pg from "pg";
import { dispatcherConfigSchema, loadConfig, type DispatcherConfig } from "@mailhooks/config";
import { getLogger } from "@mailhooks/logger";
import { createConfiguredRedis, DeliveryQueue } from "@mailhooks/queue";
import { createHttpClient } from "../../apps/dispatcher/src/delivery/http-client.js";
import { createDispatcherMetrics, type DispatcherMetrics } from "../../apps/dispatcher/src/metrics.js";
import { startConfiguredRelay, type Relay } from "../../apps/dispatcher/src/relay.js";
import { startIdleListenCheck } from "../../apps/dispatcher/src/listen-idle.js";
import { createConfiguredDeliveryWorker } from "../../apps/dispatcher/src/worker.js";
import { testDatabaseUrl, testRedisUrl } from "./env.js";
import type { Stack } from "./stack.js";
import { LOOPBACK_TARGETS } from "@mailhooks/url-policy";

export interface InProcessDispatcher {
  /** The dispatcher's own metrics (a registry of its own), for tests that read them. */
  metrics: DispatcherMetrics;
  close: () => Promise<void>;
}

/**
 * A dispatcher inside the test process, wired as apps/dispatcher/src/main.ts wires one (without
 * the maintenance schedulers): its relay, its delivery worker and its look for idle listen
 * webhooks, under a dispatcher id of its own.
 */
export function startInProcessDispatcher(
  pool: pg.Pool,
  config: DispatcherConfig,
  options: { queuePrefix: string; keyPrefix: string },
): InProcessDispatcher {
  const metrics = createDispatcherMetrics();
  const logger = getLogger("dispatcher");
  const workerConnection = createConfiguredRedis(config, "worker").connection;
  const { client, agent } = createHttpClient({ timeoutMs: config.DELIVERY_TIMEOUT_MS, allowPrivateTargets: config.ALLOW_PRIVATE_TARGETS });
  let relay: Relay | undefined;
  const delivery = createConfiguredDeliveryWorker(config, {
    pool,
    client,
    logger,
    metrics,
    connection: workerConnection,
    prefix: options.keyPrefix,
    onEnded: () => relay?.ended(),
  });
  const relayConnection = createConfiguredRedis(config, "producer").connection;
  relayConnection.on("error", () => undefined);
  const queue = new DeliveryQueue(relayConnection, options.keyPrefix);
  relay = startConfiguredRelay(config, {
    pool,
    queue,
    queuePrefix: options.queuePrefix,
    dispatcherId: `test-${randomUUID()}`,
    running: delivery.running,
    logger,
    metrics,
  });
  const idleListen = startIdleListenCheck({
    pool,
    idleMs: config.LISTEN_IDLE_HOURS * 3_600_000,
    queuePrefix: options.queuePrefix,
    logger,
  });
  let closed = false;
  return {
    metrics,
    close: async () => {
      if (closed) return;
      closed = true;
      // As main.ts stops: claim nothing more, let the attempts in flight end, then stop.
      relay?.drain();
      idleListen.close();
      await delivery.close();
      await relay?.close();
      agent.destroy();
      await queue.close();
      await Promise.all([workerConnection.quit().catch(() => undefined), relayConnection.quit().catch(() => undefined)]);
    },
  };
}

/**
 * Another dispatcher of `stack` (its queue prefix and Redis keys), configured from `env` by the
 * dispatcher's own schema, with metrics of its own that the test reads.
 */
export function startDispatcherOn(stack: Stack, env: Record<string, string>): InProcessDispatcher {
  const config = loadConfig(dispatcherConfigSchema, {
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    DISPATCHER_CONCURRENCY: "16",
    ...env,
  });
  return startInProcessDispatcher(stack.pool, config, { queuePrefix: stack.prefix, keyPrefix: stack.keyPrefix });
}
