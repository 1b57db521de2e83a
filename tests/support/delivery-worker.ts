import type pg from "pg";
import { dispatcherConfigSchema, loadConfig, type DispatcherConfig } from "@mailhooks/config";
import { attemptBudgetOf } from "@mailhooks/delivery-state";
import { getLogger } from "@mailhooks/logger";
import { createConfiguredRedis, DeliveryQueue } from "@mailhooks/queue";
import { createAdmissionControl } from "@mailhooks/scheduler";
import { createHttpClient } from "../../apps/dispatcher/src/delivery/http-client.js";
import { createDispatcherMetrics, type DispatcherMetrics } from "../../apps/dispatcher/src/metrics.js";
import { startConfiguredRelay, type Relay } from "../../apps/dispatcher/src/relay.js";
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
 * the maintenance schedulers): the outbox relay, the delivery worker, or both (`parts`).
 */
export function startInProcessDispatcher(
  pool: pg.Pool,
  config: DispatcherConfig,
  options: { queuePrefix: string; keyPrefix: string; parts: "all" | "relay-only" | "worker-only" },
): InProcessDispatcher {
  const metrics = createDispatcherMetrics();
  const logger = getLogger("dispatcher");
  const closers: (() => Promise<void>)[] = [];
  // As in main.ts: the worker wakes the relay of its own process (with parts "all").
  let relay: Relay | undefined;
  if (options.parts !== "relay-only") {
    const connection = createConfiguredRedis(config, "worker").connection;
    // The ranges of ALLOW_PRIVATE_TARGETS too (main.ts passes whether any private address is allowed).
    const { client, agent } = createHttpClient({
      timeoutMs: config.DELIVERY_TIMEOUT_MS,
      allowPrivateTargets: config.PRIVATE_TARGETS,
    });
    const worker = createConfiguredDeliveryWorker(config, {
      pool,
      client,
      logger,
      metrics,
      connection,
      prefix: options.keyPrefix,
      queuePrefix: options.queuePrefix,
      onRoom: () => relay?.room(),
    });
    closers.push(async () => {
      await worker.close();
      agent.destroy();
      await connection.quit().catch(() => undefined);
    });
  }
  if (options.parts !== "worker-only") {
    const connection = createConfiguredRedis(config, "producer").connection;
    connection.on("error", () => undefined);
    const queue = new DeliveryQueue(connection, options.keyPrefix, attemptBudgetOf(config.DELIVERY_RETRY_DELAYS_MS));
    queue.queue.on("error", () => undefined);
    const schedulerState = createAdmissionControl({
      redis: connection,
      keyPrefix: options.keyPrefix,
      localConcurrency: config.DISPATCHER_CONCURRENCY,
      slowAttemptMs: config.DISPATCHER_SLOW_ATTEMPT_MS,
    });
    relay = startConfiguredRelay(config, {
      pool,
      queue,
      queuePrefix: options.queuePrefix,
      webhookClasses: () => schedulerState.webhookClasses(),
      logger,
      metrics,
    });
    // The relay stops first: nothing is relayed to a worker that is already gone.
    closers.unshift(async () => {
      await relay?.close();
      await queue.close();
      await connection.quit().catch(() => undefined);
    });
  }
  return {
    metrics,
    close: async () => {
      for (const close of closers.splice(0)) await close();
    },
  };
}

/**
 * A dispatcher's delivery worker on `stack`'s queue (for a stack that runs only the relay),
 * configured from `env` by the dispatcher's own schema, with metrics of its own that the test
 * reads.
 */
export function startDeliveryWorker(stack: Stack, env: Record<string, string>): InProcessDispatcher {
  const config = loadConfig(dispatcherConfigSchema, {
    DATABASE_URL: testDatabaseUrl(),
    REDIS_URL: testRedisUrl(),
    ALLOW_PRIVATE_TARGETS: LOOPBACK_TARGETS,
    DISPATCHER_CONCURRENCY: "16",
    ...env,
  });
  return startInProcessDispatcher(stack.pool, config, { queuePrefix: stack.prefix, keyPrefix: stack.keyPrefix, parts: "worker-only" });
}
